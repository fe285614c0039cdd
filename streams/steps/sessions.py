"""The thread projection: sessions, public and automation threads into Redis."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from projections.ports import SessionStore
from projections.position import Position
from projections.session import (
    ThreadKey,
    ThreadPolicy,
    TokenCounter,
    event_exchange_ids,
    needs_fold,
    plan_batch,
    thread_key,
)
from schemas.events import ThreadEvent, now_ms


class SessionStep:
    """Load what the rules need for a batch (one round trip), plan it purely, write it (one round trip).

    After the write, threads where an answer landed and that are past the fold thresholds are
    handed to `request_fold`: the fold runs after the answer, never before it.
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        policy: ThreadPolicy,
        count_tokens: TokenCounter,
        request_fold: Callable[[ThreadKey], None] | None = None,
    ) -> None:
        self._store = store
        self._policy = policy
        self._count_tokens = count_tokens
        self._request_fold = request_fold

    async def __call__(self, events: Sequence[tuple[ThreadEvent, Position]]) -> None:
        wanted = list(
            dict.fromkeys(
                (thread_key(event), exchange_id)
                for event, _ in events
                for exchange_id in (event_exchange_ids(event) or ("",))  # "": the head alone
            )
        )
        loaded = await self._store.load(wanted) if wanted else {}
        now = now_ms()
        plan = plan_batch(events, loaded, policy=self._policy, now_ms=now, count_tokens=self._count_tokens)
        await self._store.write(plan.writes, now)
        if self._request_fold is not None:
            for key in sorted(plan.answered):
                if needs_fold(plan.heads.get(key), self._policy):
                    self._request_fold(key)
