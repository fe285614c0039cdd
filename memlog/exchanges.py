"""Recording exchanges: whole (with idempotency claims) or streamed part by part."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from projections.ports import Idempotency
from schemas.errors import Conflict, KeyReused
from schemas.events import check_name
from schemas.exchanges import OFF_LOOP_CHARS, ExchangePart, ReportedExchange, exchange_events, part_event, text_size
from streams.producer import EventProducer


@dataclass
class Receipt:
    """What an accepted exchange is answered with; kept on its idempotency claim for retries."""

    exchange_id: str
    position: str  # the token of the exchange's last event
    idempotent: bool = False  # True: a retry, answered with what the first attempt was given


# An idempotency key is claimed in MongoDB (adapters.mongo_archives.Idempotency) before anything
# is produced, and the answer is stored on the claim after. A pending claim lapses after PENDING_SECONDS,
# longer than the producer's own send deadline, so no retry overtakes an attempt still producing; if the
# answer cannot be stored (MongoDB went away after Kafka took the exchange), the claim lapses and a retry
# produces again. The exchange id comes from the idempotency key, so the projections hold that exchange once.
CLAIM_BACKOFF_SECONDS = (0.01, 0.2)
T = TypeVar("T")


class Exchanges:
    """Args:
    producer: where the events go.
    producer_name: the envelope's producer.
    claims: idempotency keys already used, with the answer each was given.
    read_wait_seconds: how long a retry waits for the first attempt with its key to finish.
    """

    def __init__(
        self, producer: EventProducer, producer_name: str, claims: Idempotency, read_wait_seconds: float
    ) -> None:
        self._producer = producer
        self._producer_name = producer_name
        self._claims = claims
        self._wait = read_wait_seconds

    async def record(self, exchange: ReportedExchange) -> Receipt:
        """Record a whole exchange; with an idempotency key, a retry is answered as the first attempt was."""
        key = exchange.idempotency_key
        if key is None:
            return await self._record(exchange)
        route = exchange.route
        check_name("tenant", route.tenant)
        check_name("subject", route.subject)
        check_name("idempotency_key", key)
        owner = {"session": route.subject, "automation": route.agent or "", "public": ""}[route.thread]
        claim = (route.tenant, route.thread, owner, key)
        digest = body_digest(exchange)
        held = await self._claims.reserve(*claim, route.subject, digest)
        if held is not None:
            return await self._replayed(claim, held, digest)
        try:
            accepted = await self._record(exchange)
        except BaseException:
            await self._claims.release(*claim)
            raise
        await self._claims.complete(*claim, asdict(accepted))
        return accepted

    async def record_part(self, exchange_id: str, part: ExchangePart) -> Receipt:
        """One part of an exchange streamed as it happens: its question, a tool call, its answer."""
        count = self._producer.count_tokens
        event = await _built(
            lambda: part_event(exchange_id, part, producer=self._producer_name, count_tokens=count),
            count is not None and text_size(part) > OFF_LOOP_CHARS,
        )
        position = await self._producer.produce([event])
        return Receipt(exchange_id=event.exchange_id, position=position.token())

    async def _record(self, exchange: ReportedExchange) -> Receipt:
        """Question, tool calls and answer in one batch on one partition."""
        count = self._producer.count_tokens
        events = await _built(
            lambda: exchange_events(exchange, producer=self._producer_name, count_tokens=count),
            count is not None and text_size(exchange) > OFF_LOOP_CHARS,
        )
        position = await self._producer.produce(events)
        return Receipt(exchange_id=events[0].exchange_id, position=position.token())

    async def _replayed(self, claim: tuple[str, str, str, str], held: dict[str, Any], digest: str) -> Receipt:
        """A retry: the first answer, marked idempotent; a retry racing the first waits for it (bounded).
        A "retry" with another body is not one: refused, and the first answer is not given away."""
        deadline = time.monotonic() + self._wait
        delay, longest = CLAIM_BACKOFF_SECONDS
        while _same_body(held, digest) and held.get("state") != "done":
            if time.monotonic() >= deadline:
                raise Conflict("an exchange with this idempotency key is being recorded; retry shortly")
            await asyncio.sleep(delay)
            delay = min(delay * 2, longest)
            found = await self._claims.reserve(*claim, held.get("subject"), digest)
            if found is None:  # the first attempt failed and let go of the key: this retry is not a replay
                await self._claims.release(*claim)
                raise Conflict("the first attempt with this idempotency key failed; retry it")
            held = found
        if not _same_body(held, digest):
            raise KeyReused(
                "this idempotency key was used for an exchange with another body; a retry sends the same "
                "body, another exchange takes another key"
            )
        first = held["accepted"]
        return Receipt(exchange_id=first["exchange_id"], position=first["position"], idempotent=True)


async def _built(build: Callable[[], T], off_loop: bool) -> T:
    """Events built here, or in a worker thread when counting their tokens would hold the event loop."""
    return await asyncio.to_thread(build) if off_loop else build()


def body_digest(exchange: ReportedExchange) -> str:
    """What makes a retry the same request: every field but the JSON text as received (which a retry
    may space or order differently), in canonical JSON."""
    fields = asdict(replace(exchange, original=None))
    return hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def _same_body(held: dict[str, Any], digest: str) -> bool:
    # a claim made before digests were kept has none: it is taken at its word
    return held.get("digest") in (None, digest)
