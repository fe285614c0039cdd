"""Evidence and completion (seed 004): call status with the clock passed in, run links, and RunTraced v3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from projections.archives import entry_of
from projections.evidence import call_status, entry_call, latest_runs, link_entry, with_evidence
from projections.position import Position
from projections.redaction import Redactor
from projections.session import ThreadKey, ThreadPolicy, fold_session
from projections.tokens import TokenCounter
from projections.traces import shape, trace_document
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.errors import InvalidEvent
from schemas.events import Envelope, QuestionAsked, RunTraced, ThreadEvent, ToolCalled, from_record, to_record

FIXTURES = Path(__file__).parents[1] / "fixtures" / "avro"
T0 = 1_795_000_000_000
TIMEOUT = 300_000


def env(at: int = T0, thread: str = "session", subject: str | None = "ann", agent: str | None = "allay") -> Envelope:
    return Envelope(tenant="castle", subject=subject, agent=agent, thread=thread, producer="test", occurred_at=at)


@pytest.mark.parametrize(
    ("ok", "has_result", "elapsed", "expected"),
    [
        (True, True, 0, "ok"),
        (True, True, 10 * TIMEOUT, "ok"),  # an answered call never times out
        (False, False, 0, "error"),  # a failure is an answer
        (False, True, 10 * TIMEOUT, "error"),
        (True, False, 0, "pending"),
        (True, False, TIMEOUT - 1, "pending"),
        (True, False, TIMEOUT, "incomplete"),
        (True, False, 10 * TIMEOUT, "incomplete"),
    ],
)
def test_a_call_with_no_result_is_pending_then_incomplete(
    ok: bool, has_result: bool, elapsed: int, expected: str
) -> None:
    assert call_status(ok=ok, has_result=has_result, called_at=T0, now_ms=T0 + elapsed, timeout_ms=TIMEOUT) == expected


def test_the_newest_run_serves_a_call_and_a_run_naming_no_call_serves_the_exchange() -> None:
    links = [
        {"run_id": "r1", "exchange_id": "x1", "call_index": 0, "started_at": 5},
        {"run_id": "r2", "exchange_id": "x1", "call_index": 0, "started_at": 9},  # a retried call
        {"run_id": "r3", "exchange_id": "x1", "call_index": 1, "started_at": 1},
        {"run_id": "r4", "exchange_id": "x1", "call_index": None, "started_at": 1},
    ]
    assert latest_runs(links) == {("x1", 0): "r2", ("x1", 1): "r3", ("x1", None): "r4"}


def test_a_context_view_gets_status_and_run_of_each_call(count_tokens: TokenCounter) -> None:
    events: list[ThreadEvent] = [
        QuestionAsked(env(), "x1", "open the chest and the door"),
        ToolCalled(env(T0 + 1), "x1", 0, "open_chest", "{}", "null"),  # streamed: the call, no result yet
        ToolCalled(env(T0 + 2), "x1", 1, "open_door", "{}", "null"),
        ToolCalled(env(T0 + 50), "x1", 0, "open_chest", "{}", '{"diamond":12}'),  # its result, later
    ]
    sessions = fold_session(events, policy=ThreadPolicy(), now_ms=T0, count_tokens=count_tokens)
    (exchange,) = sessions[ThreadKey.session("castle", "ann")].exchanges
    # the result replaced the call and kept the time the call was made
    assert [c.called_at for c in exchange.tool_calls] == [T0 + 1, T0 + 2]
    runs = latest_runs([{"run_id": "r1", "exchange_id": "x1", "call_index": 0, "started_at": T0}])
    early = with_evidence(exchange.view(), runs, now_ms=T0 + 3, timeout_ms=TIMEOUT)
    assert [(c["status"], c["run_id"]) for c in early["tool_calls"]] == [("ok", "r1"), ("pending", None)]
    late = with_evidence(exchange.view(), runs, now_ms=T0 + 2 + TIMEOUT, timeout_ms=TIMEOUT)
    assert [c["status"] for c in late["tool_calls"]] == ["ok", "incomplete"]
    assert late["run_id"] is None


def test_a_call_stored_before_its_time_was_kept_is_timed_by_its_exchange() -> None:
    view = {
        "exchange_id": "x1",
        "occurred_at": T0,
        "tool_calls": [{"call_index": 0, "name": "t", "arguments": {}, "result": None, "ok": True, "called_at": None}],
    }
    assert with_evidence(view, {}, now_ms=T0 + TIMEOUT, timeout_ms=TIMEOUT)["tool_calls"][0]["status"] == "incomplete"


def test_only_tool_entries_are_linked_by_their_call_index() -> None:
    runs = {("x1", 2): "r9"}
    tool = {"entry_id": "x1.t2", "exchange_id": "x1", "role": "tool"}
    answer = {"entry_id": "x1.a", "exchange_id": "x1", "role": "answer"}
    assert entry_call(tool) == ("x1", 2) and entry_call(answer) is None
    assert link_entry(tool, runs)["run_id"] == "r9"
    assert "run_id" not in link_entry(answer, runs)
    assert link_entry({"entry_id": "x2.t0", "exchange_id": "x2", "role": "tool"}, runs)["run_id"] is None
    # a call archived before its result is linked as its receipt is
    assert entry_call({"entry_id": "x1.t2.c", "exchange_id": "x1", "role": "tool"}) == ("x1", 2)


def test_a_call_sent_before_its_result_is_archived_apart_from_its_receipt() -> None:
    at = Position("memlog.threads", 0, 7)
    call = entry_of(ToolCalled(env(), "x1", 0, "mine", "{}", "null"), at)
    receipt = entry_of(ToolCalled(env(), "x1", 0, "mine", "{}", '{"ore":"obsidianwatch"}'), at)
    failure = entry_of(ToolCalled(env(), "x1", 0, "mine", "{}", "null", ok=False), at)
    assert call is not None and receipt is not None and failure is not None
    assert (call.entry_id, receipt.entry_id, failure.entry_id) == ("x1.t0.c", "x1.t0", "x1.t0")
    assert "obsidianwatch" in receipt.terms


def test_a_run_links_back_to_its_exchange_in_its_thread() -> None:
    run = RunTraced(env(thread="public"), "r1", "ok", T0, T0 + 5, exchange_id="x1", call_index=3)
    doc = trace_document(run, Redactor.build(), 7)
    assert shape(doc)["exchange"] == {"exchange_id": "x1", "call_index": 3, "thread": "public"}
    alone = trace_document(RunTraced(env(), "r2", "ok", T0, T0 + 5), Redactor.build(), 7)
    assert shape(alone)["exchange"] is None
    whole = trace_document(RunTraced(env(), "r3", "ok", T0, T0 + 5, exchange_id="x1"), Redactor.build(), 7)
    assert shape(whole)["exchange"] == {"exchange_id": "x1", "call_index": None, "thread": "session:ann"}


def test_a_call_index_needs_its_exchange() -> None:
    with pytest.raises(InvalidEvent, match="call_index"):
        RunTraced(env(), "r1", "ok", T0, T0, call_index=0)
    with pytest.raises(InvalidEvent, match="call_index"):
        RunTraced(env(), "r1", "ok", T0, T0, exchange_id="x1", call_index=-1)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_run_traced_before_v3_decodes_linked_to_no_exchange(version: str) -> None:
    codec = Codec(Catalog())
    decoded = codec.decode((FIXTURES / version / "memlog.RunTraced.bin").read_bytes())
    assert decoded.version == 3
    run = from_record(decoded.full_name, decoded.record)
    assert isinstance(run, RunTraced)
    assert run.exchange_id is None and run.call_index is None
    assert run.run_id == json.loads((FIXTURES / version / "memlog.RunTraced.json").read_text())["run_id"]


def test_a_v3_run_round_trips_with_its_link() -> None:
    codec = Codec(Catalog())
    run = RunTraced(env(), "r1", "ok", T0, T0 + 5, exchange_id="x1", call_index=2)
    decoded = codec.decode(codec.encode(run.TYPE, to_record(run, 3)))
    assert from_record(decoded.full_name, decoded.record) == run
