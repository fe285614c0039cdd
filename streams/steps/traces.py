"""The trace projection: RunTraced events into MongoDB, redacted once more on the way in; and each
stored run's link added to its thread's served mark (`ServedMarks`), so a context read joins its tool
calls to their runs without asking the traces."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from projections.ports import ServedMarks, TraceStore
from projections.position import Position
from projections.redaction import Redactor
from projections.traces import served_threads, trace_document
from schemas.events import RunTraced, now_ms
from streams.projector import advance_past


class TraceStep:
    def __init__(self, store: TraceStore, marks: ServedMarks, redactor: Redactor, keep_days: float) -> None:
        self._store = store
        self._marks = marks
        self._redactor = redactor
        self._keep_days = keep_days

    async def __call__(self, events: Sequence[tuple[RunTraced, Position]]) -> None:
        # redacted in a worker thread: a batch of large runs must not hold the worker's event loop
        documents = await asyncio.to_thread(self._documents, [run for run, _ in events])
        await self._store.append(documents)
        # after the runs are stored (a read that finds a mark finds its run), before the offsets (a
        # redelivered batch marks again what a crash left unmarked); every run, stored now or before
        await self._marks.mark_served(served_threads(documents, now_ms()))
        await advance_past(self._store, events)

    def _documents(self, runs: list[RunTraced]) -> list[dict[str, Any]]:
        return [trace_document(run, self._redactor, self._keep_days) for run in runs]
