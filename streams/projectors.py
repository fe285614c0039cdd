"""The projectors of one namespace (sessions, archives, facts, traces), built the same way for the Faust
worker (`streams/worker.py`) and for replay (`streams/rebuild.py`); Faust-free."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from memlog.adapters.embeddings import make_embedder
from memlog.config.settings import Settings
from projections.ports import Checkpoints, SessionStore
from projections.stores import Stores
from projections.thread_memory import ThreadMemory
from projections.tokens import TokenCounter, load_encoding
from schemas.codec import Codec
from schemas.events import FACT_EVENTS, THREAD_EVENTS, TRACE_EVENTS
from streams.metrics import Metrics
from streams.projector import DeadLetterSink, Projector
from streams.sealer import Sealer
from streams.shared_reads import SharedReads
from streams.steps.archive import ArchiveStep
from streams.steps.facts import FactActivityStep, FactStep
from streams.steps.sessions import SessionStep
from streams.steps.traces import TraceStep

PROJECTIONS = ("sessions", "archives", "facts", "traces")


class DelayedStep:
    """A step that waits before each batch: a drill for a projection slower than the others."""

    def __init__(self, step: Any, seconds: float) -> None:
        self._step = step
        self._seconds = seconds

    async def __call__(self, events: Any) -> None:
        await asyncio.sleep(self._seconds)
        await self._step(events)


@dataclass
class Built:
    """The projectors of one namespace, each with the short name of the topic it reads."""

    projectors: list[tuple[str, Projector[Any]]]
    sessions: SessionStore
    prepare: Callable[[], Awaitable[None]]


def build_projections(
    settings: Settings,
    *,
    codec: Codec,
    sealer: Sealer,
    stores: Stores,
    dead_letters: DeadLetterSink,
    metrics: Metrics,
    which: tuple[str, ...] = PROJECTIONS,
    request_fold: Callable[[Any], None] | None = None,
    replaying: bool = False,
    share_reads: bool = False,
) -> Built:
    """The projectors for `which` (sessions, archives, facts, traces), writing into `settings.namespace`.

    `replaying`: for a replay into a fresh namespace, which keeps the threads it writes in memory across
    its batches (`projections/thread_memory.py`).
    `share_reads`: the projectors of one topic each get their own records (the worker's agents), and
    a record one of them read is not read again by the others (`streams/shared_reads.py`).
    """
    counters = stores.counters
    sessions = stores.sessions
    facts = stores.facts
    out: list[tuple[str, Projector[Any]]] = []
    # the projectors of the threads topic, by the names `add` gives them below
    readers = {"facts": "facts-activity", "sessions": "sessions", "archives": "archive"}
    threads = [name for short, name in readers.items() if short in which]
    shared = {"threads": SharedReads(threads, first=("sessions",))} if share_reads and len(threads) > 1 else {}

    def add(name: str, topic: str, accepts: tuple[type[Any], ...], step: Any, checkpoints: Checkpoints) -> None:
        if settings.drill_step_delays.get(name):
            step = DelayedStep(step, settings.drill_step_delays[name])
        projector: Projector[Any] = Projector(
            name=name,
            topic=topic,
            source_topic=settings.topic(topic),
            codec=codec,
            accepts=accepts,
            step=step,
            checkpoints=checkpoints,
            dead_letters=dead_letters,
            counter=counters,
            metrics=metrics,
            sealer=sealer,
            shared=shared.get(topic),
        )
        out.append((topic, projector))

    if "facts" in which:
        fact_policy = settings.fact_policy()
        add("facts", "facts", FACT_EVENTS, FactStep(facts, fact_policy, make_embedder(settings)), facts)
        activity = stores.fact_activity
        add("facts-activity", "threads", THREAD_EVENTS, FactActivityStep(facts, activity, fact_policy), activity)
    if "traces" in which:
        traces = stores.traces
        trace_step = TraceStep(traces, sessions, settings.redactor(), settings.trace_days, stores.receipts)
        add("traces", "traces", TRACE_EVENTS, trace_step, traces)
    if "sessions" in which:
        count_tokens = TokenCounter(load_encoding(settings.tokenizer, settings.tokenizer_file))
        step = SessionStep(
            sessions,
            policy=settings.thread_policy(),
            count_tokens=count_tokens,
            request_fold=request_fold,
            memory=ThreadMemory() if replaying else None,
        )
        add("sessions", "threads", THREAD_EVENTS, step, sessions)
    if "archives" in which:
        archive_checkpoints = stores.archive_checkpoints
        archiving = ArchiveStep(archive_checkpoints, stores.conversations, fork_entries=settings.fork_entries)
        add("archive", "threads", THREAD_EVENTS, archiving, archive_checkpoints)

    return Built(out, sessions, stores.prepare)
