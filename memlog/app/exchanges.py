"""Recording exchanges: whole (with idempotency claims) or streamed part by part."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from memlog.app.claims import Claims, digest_of
from projections.ports import Idempotency
from schemas.events import check_name
from schemas.exchanges import OFF_LOOP_CHARS, ExchangePart, ReportedExchange, exchange_events, part_event, text_size
from streams.producer import EventProducer


@dataclass
class Receipt:
    """What an accepted exchange is answered with; kept on its idempotency claim for retries."""

    exchange_id: str
    position: str  # the token of the exchange's last event
    idempotent: bool = False  # True: a retry, answered with what the first attempt was given


# The exchange id comes from the idempotency key (memlog.claims), so the projections hold that exchange once.
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
        self._claims = Claims(claims, read_wait_seconds)

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

        async def write() -> dict[str, Any]:
            return asdict(await self._record(exchange))

        first, retried = await self._claims.once(
            (route.tenant, route.thread, owner, key), route.subject, body_digest(exchange), write, "an exchange"
        )
        return Receipt(exchange_id=first["exchange_id"], position=first["position"], idempotent=retried)

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


async def _built(build: Callable[[], T], off_loop: bool) -> T:
    """Events built here, or in a worker thread when counting their tokens would hold the event loop."""
    return await asyncio.to_thread(build) if off_loop else build()


def body_digest(exchange: ReportedExchange) -> str:
    """What makes a retry the same request: every field but the JSON text as received (which a retry
    may space or order differently)."""
    return digest_of(asdict(replace(exchange, original=None)))
