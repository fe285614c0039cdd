"""Redaction never runs on an event loop's thread: not where the API produces a run, not in the trace projection."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memlog.adapters.in_memory.stores import InMemorySessionStore
from memlog.config.settings import Settings
from projections.position import Position
from projections.redaction import REDACTED, Redactor
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import Envelope, Event, ModelStep, RunTraced, TraceToolCall
from streams.producer import EventProducer
from streams.steps.traces import TraceStep

SECRET = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc" * 2


class ThreadRecorder:
    """A redactor that notes the threads it runs on."""

    def __init__(self) -> None:
        self.redactor = Redactor.build()
        self.threads: set[int] = set()

    def text(self, value: str) -> str:
        self.threads.add(threading.get_ident())
        return self.redactor.text(value)

    def json_text(self, text: str) -> str:
        self.threads.add(threading.get_ident())
        return self.redactor.json_text(text)


def run_with_a_secret() -> RunTraced:
    return RunTraced(
        Envelope(tenant="t", subject="s", agent="a", thread="session", producer="test", occurred_at=2),
        "run-1",
        "ok",
        1,
        2,
        (ModelStep(0, "m", f"charge with {SECRET}", "done", 1, 1, 1, 1),),
        (TraceToolCall(1, "pay", f'{{"key": "{SECRET}"}}', "null", True, 1, 1),),
    )


async def test_the_api_producer_redacts_a_run_off_the_event_loop_thread(tmp_path: Path) -> None:
    producer = EventProducer(Settings(home=tmp_path), Codec(Catalog()), sealer=None)  # type: ignore[arg-type]
    produced: list[Event] = []

    async def produce(events: Sequence[Event]) -> Position:  # stands in for Kafka
        produced.extend(events)
        return Position("traces", 0, 0)

    producer.produce = produce  # type: ignore[method-assign]
    recorder = ThreadRecorder()
    traced = await producer.record_run(run_with_a_secret(), recorder)  # type: ignore[arg-type]
    assert traced is not None and traced[1] > 0
    assert recorder.threads and threading.get_ident() not in recorder.threads
    (run,) = produced
    assert isinstance(run, RunTraced) and run.steps[0].prompt == f"charge with {REDACTED}"


class MemoryTraceStore:
    def __init__(self) -> None:
        self.documents: list[dict[str, Any]] = []
        self.applied: list[Position] = []

    async def append(self, documents: list[dict[str, Any]]) -> None:
        self.documents.extend(documents)

    async def advance(self, position: Position) -> None:
        self.applied.append(position)


async def test_the_trace_projection_redacts_off_the_event_loop_thread() -> None:
    store, recorder = MemoryTraceStore(), ThreadRecorder()
    step = TraceStep(store, InMemorySessionStore(), recorder, keep_days=7)  # type: ignore[arg-type]
    await step([(run_with_a_secret(), Position("traces", 3, 41))])
    assert recorder.threads and threading.get_ident() not in recorder.threads
    (document,) = store.documents
    assert SECRET not in str(document) and store.applied == [Position("traces", 3, 41)]
