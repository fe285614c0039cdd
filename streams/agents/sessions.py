"""The session projection: thread events into the subject's Redis session."""

from __future__ import annotations

from collections.abc import Sequence

from projections.session import TokenCounter, apply_event
from projections.stores import SessionKey, SessionStore
from schemas.events import SESSION_THREAD, now_ms
from streams.projector import Positioned


class SessionStep:
    """For each event: load what the rule needs, run the rule, write the change with its position."""

    def __init__(self, store: SessionStore, *, ttl_ms: int, count_tokens: TokenCounter) -> None:
        self._store = store
        self._ttl_ms = ttl_ms
        self._count_tokens = count_tokens

    async def __call__(self, events: Sequence[Positioned]) -> None:
        for event, position in events:
            env = event.envelope
            if env.thread != SESSION_THREAD or env.subject is None:
                await self._store.advance(position)  # public and automation threads have projections of their own
                continue
            key = SessionKey(env.tenant, env.subject)
            head, exchange = await self._store.load(key, event.exchange_id)
            change = apply_event(head, exchange, event, ttl_ms=self._ttl_ms, count_tokens=self._count_tokens)
            if change is None:
                await self._store.advance(position)
            else:
                await self._store.write(key, change, position, now_ms())
