"""Writes that can be retried: an idempotency key claimed before anything is produced, the answer kept
on the claim, and a retry with the same body answered as the first attempt was (another body: 409)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from projections.ports import Idempotency
from schemas.errors import Conflict, InvalidEvent, KeyReused
from schemas.events import check_name

# An idempotency key is claimed in MongoDB (memlog.adapters.mongo_idempotency) before anything is produced, and
# the answer is stored on the claim after. A pending claim lapses after PENDING_SECONDS, longer than the
# producer's own send deadline, so no retry overtakes an attempt still producing; if the answer cannot be
# stored (MongoDB went away after Kafka took the write), the claim lapses and a retry produces again.
CLAIM_BACKOFF_SECONDS = (0.01, 0.2)
# tenant, kind (a thread, or facts / knowledge / tool-runs), owner, key ("": none)
Claim = tuple[str, str, str, str]


def digest_of(fields: Any) -> str:
    """What makes a retry the same request: its fields in canonical JSON (a retry may space or order
    its JSON text differently)."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=True, default=str).encode()).hexdigest()


def one_key(header: str | None, body: str | None) -> str | None:
    """The request's idempotency key: the `Idempotency-Key` header, or the body's field; both must agree."""
    if header is not None and body is not None and header != body:
        raise InvalidEvent("idempotency_key", "differs from the Idempotency-Key header; send one key, or the same")
    key = header if header is not None else body
    if key is not None:
        check_name("idempotency_key", key)
    return key


class Claims:
    """Args:
    claims: idempotency keys already used, with the answer each was given.
    wait_seconds: how long a retry waits for the first attempt with its key to finish.
    """

    def __init__(self, claims: Idempotency, wait_seconds: float) -> None:
        self._claims = claims
        self._wait = wait_seconds

    async def run(
        self,
        names: Sequence[tuple[str, object]],
        claim: tuple[str, str, str],
        keys: tuple[str | None, str | None],
        subject: str | None,
        fields: Any,
        write: Callable[[], Awaitable[dict[str, Any]]],
        what: str = "a write",
    ) -> dict[str, Any]:
        """`write`'s answer; with a key (`keys`: the header's and the body's, see one_key) at most once per
        claim (tenant, kind, owner, key), a retry with the same `fields` answered as the first attempt was.
        The request's `names` (field, value) are checked first: a bad one claims and writes nothing."""
        for name, value in names:
            check_name(name, value)
        key = one_key(*keys)
        if not key:
            return await write()
        check_name("tenant", claim[0])
        answer, _ = await self.once((*claim, key), subject, digest_of(fields), write, what)
        return answer

    async def once(
        self,
        claim: Claim,
        subject: str | None,
        digest: str,
        write: Callable[[], Awaitable[dict[str, Any]]],
        what: str = "a write",
    ) -> tuple[dict[str, Any], bool]:
        """`write`'s answer, run at most once per claim; True with it when it is a retry's (the first
        attempt's answer). `subject`: whose erasure forgets the claim (None: the tenant's own)."""
        held = await self._claims.reserve(*claim, subject, digest)
        if held is not None:
            return await self._replayed(claim, held, digest, what), True
        try:
            accepted = await write()
        except BaseException:
            await self._claims.release(*claim)
            raise
        await self._claims.complete(*claim, accepted)
        return accepted, False

    async def _replayed(self, claim: Claim, held: dict[str, Any], digest: str, what: str) -> dict[str, Any]:
        """A retry: the first answer; a retry racing the first waits for it (bounded). A "retry" with
        another body is not one: refused, and the first answer is not given away."""
        deadline = time.monotonic() + self._wait
        delay, longest = CLAIM_BACKOFF_SECONDS
        while _same_body(held, digest) and held.get("state") != "done":
            if time.monotonic() >= deadline:
                raise Conflict(f"{what} with this idempotency key is being recorded; retry shortly")
            await asyncio.sleep(delay)
            delay = min(delay * 2, longest)
            found = await self._claims.reserve(*claim, held.get("subject"), digest)
            if found is None:  # the first attempt failed and let go of the key: this retry is not a replay
                await self._claims.release(*claim)
                raise Conflict("the first attempt with this idempotency key failed; retry it")
            held = found
        if not _same_body(held, digest):
            raise KeyReused(
                f"this idempotency key was used for {what} with another body; a retry sends the same "
                "body, another write takes another key"
            )
        first: dict[str, Any] = held["accepted"]
        return first


def _same_body(held: dict[str, Any], digest: str) -> bool:
    # a claim made before digests were kept has none: it is taken at its word
    return held.get("digest") in (None, digest)
