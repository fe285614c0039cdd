"""The thread projection: sessions, public and automation threads into Redis."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from projections.ports import SessionStore
from projections.position import Position
from projections.session import (
    Loaded,
    ThreadKey,
    ThreadPolicy,
    TokenCounter,
    event_exchange_ids,
    needs_fold,
    plan_batch,
    thread_key,
)
from projections.thread_memory import ThreadMemory, coalesce
from schemas.events import ThreadEvent, now_ms


def state_wanted(events: Iterable[tuple[ThreadEvent, Position]]) -> list[tuple[ThreadKey, str]]:
    """What a batch's rules need loaded, once each in order: (thread, exchange id), "" for the head alone."""
    return list(
        dict.fromkeys(
            (thread_key(event), exchange_id)
            for event, _ in events
            for exchange_id in (event_exchange_ids(event) or ("",))
        )
    )


class SessionStep:
    """Load what the rules need for a batch (one round trip), plan it purely, write it (one round trip).

    After the write, threads where an answer landed and that are past the fold thresholds are
    handed to `request_fold`: the fold runs after the answer, never before it.

    With a `memory` (a replay's), the threads it keeps are not loaded: their versions are checked (one
    light round trip) and the memory answers for them; it follows each write once it has landed.
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        policy: ThreadPolicy,
        count_tokens: TokenCounter,
        request_fold: Callable[[ThreadKey], None] | None = None,
        memory: ThreadMemory | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._store = store
        self._policy = policy
        self._count_tokens = count_tokens
        self._request_fold = request_fold
        self._memory = memory
        self._clock = clock

    async def __call__(self, events: Sequence[tuple[ThreadEvent, Position]]) -> None:
        wanted = state_wanted(events)
        memory = self._memory
        if memory is None:
            loaded = await self._store.load(wanted) if wanted else {}
        else:
            loaded = await self._recall(memory, wanted)
        now = self._clock()
        plan = plan_batch(events, loaded, policy=self._policy, now_ms=now, count_tokens=self._count_tokens)
        if memory is None:
            await self._store.write(plan.writes, now)
        else:
            writes = coalesce(plan.writes, memory.threads, now)  # the store holds nothing of these past the batch
            try:
                await self._store.write(writes, now)
            except BaseException:
                memory.forget(key for key, _ in wanted)  # the write may have landed in part: load them again
                raise
            memory.remember(writes, plan.heads, now)
        if self._request_fold is not None:
            for key in sorted(plan.answered):
                if needs_fold(plan.heads.get(key), self._policy):
                    self._request_fold(key)

    async def _recall(self, memory: ThreadMemory, wanted: list[tuple[ThreadKey, str]]) -> Loaded:
        """The batch's state from the memory; a thread it does not keep yet, and the store holds, is loaded."""
        memory.check(await self._store.versions(list(dict.fromkeys(key for key, _ in wanted))))
        known, missing = memory.recall(wanted)
        return {**known, **(await self._store.load(missing))} if missing else known
