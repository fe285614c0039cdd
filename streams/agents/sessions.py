"""The session projection: thread events into the subject's Redis session."""

from __future__ import annotations

from collections.abc import Sequence

from projections.session import TokenCounter, plan_batch, session_key
from projections.stores import SessionStore
from schemas.events import now_ms
from streams.projector import Positioned


class SessionStep:
    """Load what the rule needs for a batch (one round trip), plan it purely, write it (one round trip)."""

    def __init__(self, store: SessionStore, *, ttl_ms: int, count_tokens: TokenCounter) -> None:
        self._store = store
        self._ttl_ms = ttl_ms
        self._count_tokens = count_tokens

    async def __call__(self, events: Sequence[Positioned]) -> None:
        wanted = list(
            dict.fromkeys((key, event.exchange_id) for event, _ in events if (key := session_key(event)) is not None)
        )
        loaded = await self._store.load(wanted) if wanted else {}
        now = now_ms()
        writes = plan_batch(events, loaded, ttl_ms=self._ttl_ms, now_ms=now, count_tokens=self._count_tokens)
        await self._store.write(writes, now)
