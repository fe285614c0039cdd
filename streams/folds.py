"""The fold agent's work: summarize a thread's oldest exchanges and log the fold as ThreadFolded.

The fold runs after the answer, in the background, so no reader waits for a model; a replay
applies the stored summary and never calls one. Only the urgent fold (past 42,000 tokens) runs
in the context read itself.

A fold is sealed under the keys taken *before* the thread was read (DESIGN "Erasure, export,
replay"): a summary may take seconds to make, and an erasure in between deletes those keys, so the
fold is shredded with everything else of the erased person. Sealed under the key current when it is
produced, it would be readable (a new key is made for a subject who writes after their erasure) and
would bring erased text back as a summary.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace

from projections.engines import Summarizer, SummarizerFailed
from projections.ports import SessionStore
from projections.position import Position
from projections.session import Exchange, Session, ThreadKey, ThreadPolicy, plan_fold
from projections.shared import plan_segments
from projections.tool_results import HEADING, join_summary, merge_tool_lines, section_budget, split_summary
from schemas.errors import LogUnavailable, StoreUnavailable, SubjectErasing
from schemas.events import AUTOMATION_THREAD, SESSION_THREAD, Envelope, ThreadFolded, now_ms
from streams.metrics import Metrics
from streams.producer import EventProducer
from streams.sealer import Who

log = logging.getLogger(__name__)

Pinned = dict[Who, tuple[str, bytes]]


class FoldService:
    def __init__(
        self,
        store: SessionStore,
        producer: EventProducer,
        summarizer: Summarizer,
        policy: ThreadPolicy,
        producer_name: str,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._producer = producer
        self._summarizer = summarizer
        self._policy = policy
        self._producer_name = producer_name
        self._metrics = metrics

    async def fold(self, key: ThreadKey, *, urgent: bool = False, force: bool = False) -> Position | None:
        """Fold the thread if it needs it (or, forced, whatever it can); the ThreadFolded's position, else None.

        None too when someone whose lines it would fold is being erased, or joined the thread between
        the two reads of a shared one: a later request folds it.
        """
        # forced: an explicit compact folds below the thresholds, still keeping the newest exchanges
        policy = replace(self._policy, fold_tokens=0, fold_exchanges=0) if force else self._policy
        try:
            read = await self._pin_and_read(key, policy)
        except SubjectErasing as exc:
            log.info("fold of %s put off: %s", key, exc)
            return None
        if read is None:
            return None
        session, pinned = read
        folded = plan_fold(session, policy)
        if not folded:
            return None
        started = time.perf_counter()
        if key.thread == SESSION_THREAD:
            summary = await self._summarize(session.head.summary, folded, self._policy.summary_chars)
            events = [self._event(key, key.owner, folded, folded, summary, urgent, segment=False)]
        else:
            built = await self._segments(key, session, folded, pinned, urgent)
            if built is None:
                return None
            events = built
        if self._metrics is not None:
            self._metrics.fold_seconds.labels(self._summarizer.name).observe(time.perf_counter() - started)
        position = await self._producer.produce(events, pinned=pinned)
        if self._metrics is not None:
            self._metrics.folds.labels(self._summarizer.name, str(urgent).lower()).inc()
        characters = sum(len(event.summary) for event in events)
        log.info("folded %d exchanges of %s into %d characters (%s)", len(folded), key, characters, position.token())
        return position

    async def applied(self, position: Position) -> bool:
        """Whether the sessions projection has applied `position` (a fold's, refused or not)."""
        return await self._store.applied(position.topic, position.partition) >= position.offset

    async def _pin_and_read(self, key: ThreadKey, policy: ThreadPolicy) -> tuple[Session, Pinned] | None:
        """The thread, read after the keys of everyone whose lines or summary part it may fold were taken."""
        if key.thread == SESSION_THREAD:
            askers: set[str | None] = {key.owner}
        else:
            # a shared thread: who is in it is known only once it is read, so read it, take their
            # keys, and read it again; a fold made from the second read holds nothing older than them
            first = await self._store.read(key)
            if first is None:
                return None
            askers = {exchange.subject for exchange in plan_fold(first, policy)}
            askers |= {segment.asker for segment in first.head.segments}
        pinned: Pinned = {}
        for asker in sorted_askers(askers):
            held = await self._producer.pin(key.tenant, asker)
            if held is None:
                log.info("fold of %s put off: a key it needs is gone (an erasure is under way)", key)
                return None
            pinned[(key.tenant, asker)] = held
        session = await self._store.read(key)
        return None if session is None else (session, pinned)

    async def _segments(
        self, key: ThreadKey, session: Session, folded: list[Exchange], pinned: Pinned, urgent: bool
    ) -> list[ThreadFolded] | None:
        """One ThreadFolded per asker whose part of the summary changes, each summing up their lines alone."""
        plans = plan_segments(session.head, folded, self._policy.summary_chars)
        if any((key.tenant, plan.asker) not in pinned for plan in plans):
            log.info("fold of %s put off: someone joined it between its two reads", key)
            return None
        events = []
        for plan in plans:
            summary = ""
            if plan.budget > 0:
                summary = await self._summarize(plan.previous, plan.folded, plan.budget)
            events.append(self._event(key, plan.asker, folded, plan.folded, summary, urgent, segment=True))
        return events

    async def _summarize(self, previous: str, folded: Sequence[Exchange], limit: int) -> str:
        """The summarizer's prose, then the tool results section (projections.tool_results), within `limit`."""
        prose, lines = split_summary(previous)
        kept = merge_tool_lines(lines, folded, section_budget(limit))
        room = limit - (len(HEADING) + sum(len(line) + 1 for line in kept) + 1 if kept else 0)
        text = await self._summarizer.summarize(prose, folded, room) if room > 0 else ""
        return join_summary(text, kept, limit)

    def _event(
        self,
        key: ThreadKey,
        subject: str | None,
        folded: Sequence[Exchange],
        covers: Sequence[Exchange],
        summary: str,
        urgent: bool,
        *,
        segment: bool,
    ) -> ThreadFolded:
        envelope = Envelope(
            tenant=key.tenant,
            thread=key.thread,
            subject=subject,
            agent=key.owner if key.thread == AUTOMATION_THREAD else None,
            producer=self._producer_name,
            occurred_at=now_ms(),
        )
        # one id per fold, shared by a shared thread's segments
        first, last = folded[0].exchange_id, folded[-1].exchange_id
        fold_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"memlog-fold:{key}:{first}:{last}"))
        ids = tuple(exchange.exchange_id for exchange in covers)
        return ThreadFolded(envelope, fold_id, summary, ids, self._summarizer.name, urgent, segment)


def sorted_askers(askers: set[str | None]) -> list[str | None]:
    """Askers in a fixed order (the tenant's own key, for lines about no subject, first)."""
    return sorted(askers, key=lambda asker: (asker is not None, asker or ""))


# a thread folds once per crossing of its thresholds: until the projection has applied the fold it
# produced, the thread still reads as past them, and every answer in between would fold it again
APPLIED_WAIT_SECONDS = 60.0  # then a lagging projection may be folded for again (a refused duplicate at worst)
APPLIED_POLL_SECONDS = (0.05, 1.0)  # the first pause between two looks at the checkpoint, and the longest


class FoldScheduler:
    """Runs folds in the background, one at a time per thread, retrying failed ones later.

    A thread's fold is in flight until the sessions projection has applied its ThreadFolded (or
    APPLIED_WAIT_SECONDS passed). A request meanwhile is kept, and answered once that fold is applied:
    by a fold only if the thread, as it then reads, is still past the thresholds.
    """

    def __init__(self, service: FoldService, retry_seconds: float) -> None:
        self._service = service
        self._retry_seconds = retry_seconds
        self._running: dict[ThreadKey, asyncio.Task[None]] = {}
        self._waiting: set[ThreadKey] = set()  # folded, its ThreadFolded not applied yet
        self._again: set[ThreadKey] = set()  # asked for while its fold was in flight

    def request(self, key: ThreadKey) -> None:
        if key in self._running:
            self._again.add(key)
        else:
            self._running[key] = asyncio.get_running_loop().create_task(self._run(key))

    def pending(self) -> int:
        """Threads with a fold in flight: being made, or waiting for the projection to apply it."""
        return len(self._running)

    async def _run(self, key: ThreadKey) -> None:
        try:
            while True:
                self._again.discard(key)
                position = await self._fold(key)
                if position is not None:
                    self._waiting.add(key)
                    await self._until_applied(key, position)
                    self._waiting.discard(key)
                if key not in self._again:
                    return
        finally:
            self._waiting.discard(key)
            self._again.discard(key)
            self._running.pop(key, None)

    async def _fold(self, key: ThreadKey) -> Position | None:
        while True:
            try:
                return await self._service.fold(key)
            except (SummarizerFailed, LogUnavailable, StoreUnavailable) as exc:
                # Nothing is lost: the thread stays unfolded until a fold succeeds.
                log.warning("fold of %s failed, retrying in %.0fs: %s", key, self._retry_seconds, exc)
                await asyncio.sleep(self._retry_seconds)

    async def _until_applied(self, key: ThreadKey, position: Position) -> None:
        deadline = time.monotonic() + APPLIED_WAIT_SECONDS
        pause, longest = APPLIED_POLL_SECONDS
        try:
            while not await self._service.applied(position):
                if time.monotonic() >= deadline:
                    log.warning("fold of %s not applied in %.0fs (%s)", key, APPLIED_WAIT_SECONDS, position.token())
                    return
                await asyncio.sleep(pause)
                pause = min(pause * 2, longest)
        except StoreUnavailable as exc:
            log.warning("fold of %s: its application could not be checked: %s", key, exc)

    async def drain(self) -> None:
        """Wait until the folds in flight are made (tests, shutdown); not for the projection to apply them."""
        while making := [task for key, task in self._running.items() if key not in self._waiting]:
            await asyncio.wait(making, timeout=0.05)
