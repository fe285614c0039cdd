"""The fold agent's work: summarize a thread's oldest exchanges and log the fold as ThreadFolded.

The fold runs after the answer, in the background, so no reader waits for a model; a replay
applies the stored summary and never calls one. Only the urgent fold (past 42,000 tokens) runs
in the context read itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import replace

from adapters.summarizers import Summarizer, SummarizerFailed
from projections.ports import SessionStore
from projections.position import Position
from projections.session import ThreadKey, ThreadPolicy, plan_fold
from schemas.errors import LogUnavailable, StoreUnavailable
from schemas.events import AUTOMATION_THREAD, SESSION_THREAD, Envelope, ThreadFolded, now_ms
from streams.metrics import Metrics
from streams.producer import EventProducer

log = logging.getLogger(__name__)


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
        """Fold the thread if it needs it (or, forced, whatever it can); the ThreadFolded's position, else None."""
        session = await self._store.read(key)
        if session is None:
            return None
        # forced: an explicit compact folds below the thresholds, still keeping the newest exchanges
        policy = replace(self._policy, fold_tokens=0, fold_exchanges=0) if force else self._policy
        folded = plan_fold(session, policy)
        if not folded:
            return None
        started = time.perf_counter()
        summary = await self._summarizer.summarize(session.head.summary, folded, self._policy.summary_chars)
        if self._metrics is not None:
            self._metrics.fold_seconds.labels(self._summarizer.name).observe(time.perf_counter() - started)
        covers = tuple(exchange.exchange_id for exchange in folded)
        envelope = Envelope(
            tenant=key.tenant,
            thread=key.thread,
            subject=key.owner if key.thread == SESSION_THREAD else None,
            agent=key.owner if key.thread == AUTOMATION_THREAD else None,
            producer=self._producer_name,
            occurred_at=now_ms(),
        )
        fold_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"memlog-fold:{key}:{covers[0]}:{covers[-1]}"))
        position = await self._producer.produce(
            [ThreadFolded(envelope, fold_id, summary, covers, self._summarizer.name, urgent)]
        )
        if self._metrics is not None:
            self._metrics.folds.labels(self._summarizer.name, str(urgent).lower()).inc()
        log.info("folded %d exchanges of %s into %d characters (%s)", len(covers), key, len(summary), position.token())
        return position


class FoldScheduler:
    """Runs folds in the background, one at a time per thread, retrying failed ones later."""

    def __init__(self, service: FoldService, retry_seconds: float) -> None:
        self._service = service
        self._retry_seconds = retry_seconds
        self._running: dict[ThreadKey, asyncio.Task[None]] = {}

    def request(self, key: ThreadKey) -> None:
        if key not in self._running:
            self._running[key] = asyncio.get_running_loop().create_task(self._run(key))

    async def _run(self, key: ThreadKey) -> None:
        try:
            while True:
                try:
                    await self._service.fold(key)
                    return
                except (SummarizerFailed, LogUnavailable, StoreUnavailable) as exc:
                    # Nothing is lost: the thread stays unfolded until a fold succeeds.
                    log.warning("fold of %s failed, retrying in %.0fs: %s", key, self._retry_seconds, exc)
                    await asyncio.sleep(self._retry_seconds)
        finally:
            self._running.pop(key, None)

    async def drain(self) -> None:
        """Wait for the folds in flight (tests, shutdown)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)
