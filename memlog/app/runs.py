"""Runs (seed 000, "Traces"): tracing one agent answer, and the operator's view of their shapes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from memlog.app.positions import Positions
from projections.cursors import Cursors
from projections.paging import list_binding, run_cursor, run_key
from projections.ports import Ledger, TraceStore
from projections.position import Position
from projections.redaction import Redactor
from projections.traces import shape, whole_trace
from schemas.errors import InvalidEvent
from schemas.events import (
    AUTOMATION_THREAD,
    SESSION_THREAD,
    Envelope,
    ModelStep,
    RunTraced,
    TraceToolCall,
    check_name,
    check_text,
    json_text,
    now_ms,
)
from streams.producer import EventProducer


@dataclass(frozen=True)
class RunStep:
    """One model step as the backend reports it; `seq` None places it by its start time."""

    seq: int | None
    model: str
    prompt: str
    output: str
    input_tokens: int
    output_tokens: int
    started_at: int
    duration_ms: int


@dataclass(frozen=True)
class RunToolCall:
    seq: int | None
    name: str
    started_at: int
    duration_ms: int
    arguments: Any = field(default_factory=dict)  # any JSON value
    result: Any = None
    ok: bool = True


@dataclass(frozen=True)
class Run:
    tenant: str
    subject: str | None
    agent: str
    run_id: str | None  # None: a new one
    status: str
    started_at: int
    ended_at: int
    steps: tuple[RunStep, ...] = ()
    tool_calls: tuple[RunToolCall, ...] = ()
    exchange_id: str | None = None  # the exchange whose tool call this run served (seed 004, evidence)
    call_index: int | None = None  # that call's place among the exchange's calls
    thread: str | None = None  # the exchange's thread; None: the subject's session, else the agent's automation


@dataclass(frozen=True)
class Traced:
    run_id: str
    sampled: bool  # False: TRACE_SAMPLE left the run out; nothing was produced
    position: Position | None
    bytes: int


def run_event(run: Run, producer: str) -> RunTraced:
    """The run as an event, with every step and call placed on one timeline."""
    order = sorted(
        [("step", i, s.seq, s.started_at) for i, s in enumerate(run.steps)]
        + [("tool", i, c.seq, c.started_at) for i, c in enumerate(run.tool_calls)],
        key=lambda item: (item[2] if item[2] is not None else -1, item[3]),
    )
    seqs = {(kind, index): seq if seq is not None else n for n, (kind, index, seq, _) in enumerate(order)}
    envelope = Envelope(
        tenant=run.tenant,
        subject=run.subject,
        agent=run.agent,
        thread=run.thread or (SESSION_THREAD if run.subject else AUTOMATION_THREAD),
        producer=producer,
        occurred_at=run.ended_at,
    )
    steps = tuple(
        ModelStep(
            seqs[("step", i)], s.model, s.prompt, s.output, s.input_tokens, s.output_tokens, s.started_at, s.duration_ms
        )
        for i, s in enumerate(run.steps)
    )
    calls = tuple(
        TraceToolCall(
            seqs[("tool", i)],
            check_text(f"tool_calls[{i}].name", c.name),  # not in RunTraced: older events replay whatever their names
            json_text(f"tool_calls[{i}].arguments", c.arguments),
            json_text(f"tool_calls[{i}].result", c.result),
            c.ok,
            c.started_at,
            c.duration_ms,
        )
        for i, c in enumerate(run.tool_calls)
    )
    if run.thread is not None and run.exchange_id is None:
        raise InvalidEvent("thread", "names the thread of the exchange the run served: exchange_id is needed too")
    return RunTraced(
        envelope,
        run.run_id or str(uuid.uuid4()),
        run.status,
        run.started_at,
        run.ended_at,
        steps,
        calls,
        exchange_id=run.exchange_id,
        call_index=run.call_index,
    )


class Runs:
    """Args:
    producer: where traced runs go.
    producer_name: the envelope's producer.
    traces: the namespace's trace projection.
    redactor: removes secrets before a run is produced.
    positions: waits for `after` before a read.
    ledger: records every read of a whole trace.
    cursors: seals and opens the cursors of `recent`.
    """

    def __init__(
        self,
        producer: EventProducer,
        producer_name: str,
        traces: TraceStore,
        redactor: Redactor,
        positions: Positions,
        ledger: Ledger,
        *,
        cursors: Cursors,
    ) -> None:
        self._producer = producer
        self._producer_name = producer_name
        self._traces = traces
        self._redactor = redactor
        self._positions = positions
        self._ledger = ledger
        self._cursors = cursors

    async def trace(self, run: Run) -> Traced:
        """Redacted before it is produced, sampled by run id."""
        event = run_event(run, self._producer_name)
        traced = await self._producer.record_run(event, self._redactor)
        if traced is None:
            return Traced(event.run_id, sampled=False, position=None, bytes=0)
        position, size = traced
        return Traced(event.run_id, sampled=True, position=position, bytes=size)

    async def recent(
        self,
        tenant: str,
        *,
        agent: str | None,
        status: str | None,
        since: int | None,
        until: int | None,
        limit: int,
        after: str | None,
        cursor: str | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Recent runs of a tenant, by shape only, without their timelines, and the cursor of the next
        page (None on the last)."""
        if agent is not None:
            check_name("agent", agent)
        check_name("tenant", tenant)
        bound = list_binding("runs", tenant, agent, status, since, until)
        before = None if cursor is None else run_key(self._cursors, cursor, bound)
        await self._positions.wait_all(after)
        docs = await self._traces.recent(
            tenant, now_ms(), agent=agent, status=status, since=since, until=until, limit=limit + 1, before=before
        )
        page = docs[:limit]
        following = (
            run_cursor(self._cursors, bound, page[-1]["started_at"], page[-1]["run_id"]) if len(docs) > limit else None
        )
        return [{k: v for k, v in shape(d).items() if k != "timeline"} for d in page], following

    async def shape(self, tenant: str, run_id: str, *, after: str | None) -> dict[str, Any] | None:
        """One run's shape as a timeline; None when it was never traced, sampled out, or expired."""
        check_name("tenant", tenant)
        await self._positions.wait_all(after)
        doc = await self._traces.get(tenant, run_id, now_ms())
        return None if doc is None else shape(doc)

    async def whole(self, tenant: str, run_id: str, *, requested_by: str, after: str | None) -> dict[str, Any] | None:
        """One run in full for a developer (seed 000: "a developer tool reads them"): its steps, prompts,
        outputs, tool arguments and results, redacted once more on the way out. The read is in the ledger
        before anything is returned; None when the run was never traced, sampled out, or expired."""
        check_name("tenant", tenant)
        await self._positions.wait_all(after)
        doc = await self._traces.get(tenant, run_id, now_ms())
        if doc is None:
            return None
        await self._ledger.record(
            "trace-read", tenant=tenant, subject=doc.get("subject"), run_id=run_id, requested_by=requested_by
        )
        return whole_trace(doc, self._redactor)
