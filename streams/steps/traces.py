"""The trace projection: RunTraced events into MongoDB, redacted once more on the way in, and
ReceiptRecorded events into the receipts (seed 004); and each stored run's or receipt's link added to its
thread's served mark (`ServedMarks`), so a context read joins its tool calls to their runs and receipts
without asking either store."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from projections.ports import ServedMarks, TraceStore
from projections.position import Position
from projections.receipts import ReceiptStore, receipt_document
from projections.redaction import Redactor
from projections.traces import served_threads, trace_document
from schemas.events import ReceiptRecorded, RunTraced, TraceEvent, now_ms
from streams.projector import advance_past


class TraceStep:
    def __init__(
        self,
        store: TraceStore,
        marks: ServedMarks,
        redactor: Redactor,
        keep_days: float,
        receipts: ReceiptStore | None = None,
    ) -> None:
        self._store = store
        self._marks = marks
        self._redactor = redactor
        self._keep_days = keep_days
        self._receipts = receipts

    async def __call__(self, events: Sequence[tuple[TraceEvent, Position]]) -> None:
        # redacted in a worker thread: a batch of large runs must not hold the worker's event loop
        documents = await asyncio.to_thread(self._documents, events)
        runs = [doc for doc in documents if "run_id" in doc]
        receipts = [doc for doc in documents if "receipt_id" in doc]
        await self._store.append(runs)
        if receipts and self._receipts is not None:  # idempotent by position: a redelivered one is skipped
            await self._receipts.append(receipts)
        # after the runs are stored (a read that finds a mark finds its run), before the offsets (a
        # redelivered batch marks again what a crash left unmarked); every run, stored now or before
        marked = runs if self._receipts is None else documents
        await self._marks.mark_served(served_threads(marked, now_ms()))
        await advance_past(self._store, events)

    def _documents(self, events: Sequence[tuple[TraceEvent, Position]]) -> list[dict[str, Any]]:
        documents = []
        for event, position in events:
            if isinstance(event, RunTraced):
                documents.append(trace_document(event, self._redactor, self._keep_days))
            elif isinstance(event, ReceiptRecorded):
                documents.append(receipt_document(event, position, self._redactor, self._keep_days))
        return documents
