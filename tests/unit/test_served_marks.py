"""Served marks (issues 16, 38): a context read joins a thread's tool calls to the runs linked in its
mark, read with the thread, and asks the trace store only until the namespace's marks are complete.
The pure rules (`projections.traces.served_threads`, `merge_served`), and the read, the trace
projection and the upgrade path over the in-memory stores, with the trace store's reads counted."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from memlog.adapters.in_memory import InMemoryReceiptStore, InMemorySessionStore, InMemoryTraceStore
from memlog.adapters.wiring import mark_served_threads
from memlog.app.context import ContextReads
from memlog.app.evidence import Evidence
from memlog.app.positions import Positions
from memlog.config.settings import Settings
from projections.archives import parse_thread, thread_ref
from projections.position import Position
from projections.redaction import Redactor
from projections.session import Exchange, SessionChange, SessionWrite, ThreadKey, ThreadPolicy
from projections.traces import DAY_MS, merge_served, served_links, served_threads, trace_document
from schemas.events import Envelope, RunTraced, now_ms
from streams.steps.traces import TraceStep
from tests.unit.strategies import names

ANN = ThreadKey.session("castle", "ann")
BOB = ThreadKey.session("castle", "bob")
threads = st.one_of(
    st.builds(ThreadKey.session, names, names),
    st.builds(ThreadKey.public, names),
    st.builds(ThreadKey.automation, names, names),
)


def doc(key: ThreadKey, expires_at: int, served: bool = True, run_id: str = "r") -> dict[str, Any]:
    ref = thread_ref(key.thread, key.owner) if served else None
    link = {"run_id": run_id, "exchange_id": "x1", "call_index": None, "started_at": 0}
    return {"tenant": key.tenant, "exchange_thread": ref, "expires_at": expires_at, **link}


@given(st.lists(st.tuples(threads, st.integers(0, 10**15), st.booleans())), st.integers(0, 10**15))
def test_served_threads_keep_each_threads_unexpired_links_until_their_latest_end(runs: list[Any], now: int) -> None:
    docs = [doc(key, at, served, run_id=f"r{n}") for n, (key, at, served) in enumerate(runs)]
    expected: dict[ThreadKey, tuple[int, list[str]]] = {}
    for n, (key, at, served) in enumerate(runs):
        if served and at > now:
            until, ids = expected.get(key, (0, []))
            expected[key] = (max(at, until), [*ids, f"r{n}"])
    found = served_threads(docs, now)
    assert {
        key: (mark.until_ms, [link["run_id"] for link in served_links(mark.links, now)]) for key, mark in found.items()
    } == expected


@given(st.lists(st.tuples(threads, st.integers(1, 10**15))), st.integers(0, 20))
def test_served_marks_merge_as_one_list(runs: list[tuple[ThreadKey, int]], cut: int) -> None:
    docs = [doc(key, at, run_id=f"r{n}") for n, (key, at) in enumerate(runs)]
    whole = served_threads(docs, 0)
    assert merge_served(served_threads(docs[:cut], 0), served_threads(docs[cut:], 0)) == whole
    swapped = merge_served(served_threads(docs[cut:], 0), served_threads(docs[:cut], 0))
    assert swapped.keys() == whole.keys()
    for key, mark in swapped.items():  # the same links, in another order
        assert mark.until_ms == whole[key].until_ms
        assert sorted(mark.links.splitlines()) == sorted(whole[key].links.splitlines())


@given(threads)
def test_a_runs_thread_reference_names_its_thread_again(key: ThreadKey) -> None:
    assert parse_thread(thread_ref(key.thread, key.owner)) == (key.thread, key.owner)


def test_a_reference_memlog_never_writes_marks_nothing() -> None:
    assert served_threads([{"tenant": "castle", "exchange_thread": "somewhere:else", "expires_at": 10}], 0) == {}


class CountedTraces(InMemoryTraceStore):
    """The in-memory trace store, counting the evidence reads a context read makes."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    async def served(self, tenant: str, thread: str, exchange_ids: list[str], now_ms: int) -> list[dict[str, Any]]:
        self.asked += 1
        return await super().served(tenant, thread, exchange_ids, now_ms)


def reads(sessions: InMemorySessionStore, traces: CountedTraces) -> ContextReads:
    positions = Positions(Settings(), lambda: None, None)  # type: ignore[arg-type, return-value]  # no `after`
    # folds and recall are never reached: no thread here nears the urgent threshold, and no question is asked
    return ContextReads(sessions, None, None, positions, ThreadPolicy(), None, Evidence(traces, 300_000))  # type: ignore[arg-type]


async def a_thread(sessions: InMemorySessionStore, key: ThreadKey, offset: int) -> None:
    now = now_ms()
    exchange = Exchange(f"x-{key.owner}", "where?", answer="there", occurred_at=now, tokens=2)
    change = SessionChange(exchange, False, 2, now, now + DAY_MS, count_delta=1)
    assert await sessions.write([SessionWrite(Position("threads", 0, offset), key, change)], now) == [True]


def a_run(key: ThreadKey, run_id: str) -> RunTraced:
    env = Envelope(tenant=key.tenant, subject=key.owner, agent="allay", thread=key.thread, producer="test")
    end = now_ms()
    return RunTraced(env, run_id, "ok", end - 10, end, exchange_id=f"x-{key.owner}")


async def run_ids(contexts: ContextReads, key: ThreadKey) -> Any:
    read = await contexts.ready_thread(key, after=None, wait=None)
    return [view["run_id"] for view in json.loads(read.exchanges_json)]


async def test_a_thread_no_run_serves_is_read_without_asking_the_traces_once_marks_are_complete() -> None:
    sessions, traces = InMemorySessionStore(), CountedTraces()
    await a_thread(sessions, ANN, 0)
    await a_thread(sessions, BOB, 1)
    assert await run_ids(reads(sessions, traces), ANN) == [None]
    assert traces.asked == 1  # marks not known complete: an unmarked thread may still be served

    await mark_served_threads(traces, sessions, InMemoryReceiptStore())  # nothing stored: complete at once
    contexts = reads(sessions, traces)
    assert await run_ids(contexts, ANN) == [None]
    assert traces.asked == 1

    step = TraceStep(traces, sessions, Redactor.build(), keep_days=7)
    await step([(a_run(ANN, "r1"), Position("traces", 0, 0))])
    assert await run_ids(contexts, ANN) == ["r1"]  # from the thread's mark: the traces are not asked
    await step([(a_run(ANN, "r2"), Position("traces", 0, 1))])  # a later run of the same exchange
    assert await run_ids(contexts, ANN) == ["r2"]
    assert await run_ids(contexts, BOB) == [None]  # no mark, and marks are complete: no run serves it
    assert traces.asked == 1


async def test_runs_stored_before_marks_are_marked_before_any_read_trusts_them() -> None:
    sessions, traces = InMemorySessionStore(), CountedTraces()
    await a_thread(sessions, ANN, 0)
    await a_thread(sessions, BOB, 1)
    # stored by a trace projection that kept no marks
    await traces.append([trace_document(a_run(ANN, "r0"), Redactor.build(), 7)])
    contexts = reads(sessions, traces)
    assert await run_ids(contexts, ANN) == ["r0"]

    await mark_served_threads(traces, sessions, InMemoryReceiptStore())
    assert await sessions.served_marks_complete()
    contexts = reads(sessions, traces)
    asked = traces.asked
    assert await run_ids(contexts, ANN) == ["r0"]
    assert await run_ids(contexts, BOB) == [None]
    assert traces.asked == asked  # ann's run is linked in her mark
