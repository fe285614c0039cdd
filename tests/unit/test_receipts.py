"""Receipts (seed 004, evidence you can check): the pure rule of an answer's state, receipts joined to
context views and archived entries, the event through Avro (sealed), and the trace projection storing
them once per record of the log and marking their thread."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlog.adapters.in_memory import InMemoryReceiptStore, InMemorySessionStore, InMemoryTraceStore
from memlog.app.evidence import Evidence
from projections.evidence import (
    CallStatus,
    answer_state,
    archived_evidence,
    archived_exchanges,
    latest_receipts,
    with_evidence,
)
from projections.position import Position
from projections.receipts import receipt_document
from projections.redaction import Redactor
from projections.sealing import PERSONAL, new_data_key, open_sealed, seal, take_personal
from projections.session import Exchange, SessionChange, SessionWrite, ThreadKey, ToolCall
from projections.traces import DAY_MS
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.errors import InvalidEvent
from schemas.events import RECEIPT_RESULTS, Envelope, ReceiptRecorded, from_record, now_ms, to_record
from streams.steps.traces import TraceStep
from tests.unit.strategies import envelopes, names

CODEC = Codec(Catalog())
KEY = new_data_key()
T0 = 1_795_000_000_000
TIMEOUT = 300_000


@pytest.mark.parametrize(
    ("statuses", "receipts", "action", "expected"),
    [
        (["ok", "ok"], ["passed", "passed"], None, "verified"),
        (["ok", "error"], ["passed", "failed_expected"], None, "verified"),  # a failure the check expected
        (["ok", "ok"], ["passed", None], None, "unverified"),  # one call has no receipt
        (["ok", "ok"], ["passed", "failed"], None, "unverified"),
        (["ok"], ["not_run"], None, "unverified"),
        (["ok", "incomplete"], ["passed", "passed"], None, "incomplete"),  # a call never answered
        (["incomplete"], [None], None, "incomplete"),
        (["pending"], [None], None, "unverified"),  # still waiting: not yet incomplete
        ([], [], "passed", "verified"),  # a claimed action, checked
        ([], [], "failed", "unverified"),
        (["ok"], ["passed"], "not_run", "unverified"),  # the claimed action counts too once a receipt names it
        ([], [], None, None),  # nothing to check
    ],
)
def test_an_answers_state_follows_the_rule(
    statuses: list[CallStatus], receipts: list[str | None], action: str | None, expected: str | None
) -> None:
    assert answer_state(statuses, receipts, action) == expected


def test_an_exchange_with_no_answer_yet_has_no_state_unless_a_call_never_answered() -> None:
    assert answer_state(["ok"], ["passed"], None, answered=False) is None
    assert answer_state(["incomplete"], [None], None, answered=False) == "incomplete"


def test_the_newest_receipt_of_a_call_counts_and_run_links_are_passed_over() -> None:
    links = [
        {"exchange_id": "x1", "call_index": 0, "receipt": "failed", "recorded_at": 5, "offset": 1},
        {"exchange_id": "x1", "call_index": 0, "receipt": "passed", "recorded_at": 9, "offset": 2},
        {"exchange_id": "x1", "call_index": 1, "receipt": "not_run", "recorded_at": 9, "offset": 7},
        {
            "exchange_id": "x1",
            "call_index": 1,
            "receipt": "passed",
            "recorded_at": 9,
            "offset": 4,
        },  # earlier on the log
        {"exchange_id": "x1", "call_index": None, "receipt": "passed", "recorded_at": 1, "offset": 0},
        {"exchange_id": "x1", "call_index": 0, "run_id": "r1", "started_at": 99},
    ]
    assert latest_receipts(links) == {("x1", 0): "passed", ("x1", 1): "not_run", ("x1", None): "passed"}


def view(*results: object, answer: str | None = "done") -> dict[str, object]:
    calls = [
        {"call_index": i, "name": "t", "arguments": {}, "result": r, "ok": True, "called_at": T0}
        for i, r in enumerate(results)
    ]
    return {"exchange_id": "x1", "occurred_at": T0, "tool_calls": calls, "answer": answer}


def test_a_late_receipt_turns_an_unverified_answer_verified_at_the_next_read() -> None:
    exchange = view({"opened": True}, {"keys": 3})
    before = with_evidence(exchange, {}, now_ms=T0, timeout_ms=TIMEOUT, receipts={("x1", 0): "passed"})
    assert before["answer_state"] == "unverified"
    assert [c["receipt"] for c in before["tool_calls"]] == ["passed", None]
    receipts = {("x1", 0): "passed", ("x1", 1): "passed"}
    after = with_evidence(exchange, {}, now_ms=T0, timeout_ms=TIMEOUT, receipts=receipts)
    assert after["answer_state"] == "verified" and after["receipt"] is None


def test_a_call_that_never_answered_makes_the_answer_incomplete_whatever_the_receipts() -> None:
    exchange = view({"opened": True}, None)
    receipts = {("x1", 0): "passed", ("x1", 1): "passed"}
    early = with_evidence(exchange, {}, now_ms=T0 + 1, timeout_ms=TIMEOUT, receipts=receipts)
    assert early["answer_state"] == "verified"  # the call is pending, and its receipt vouches for it
    late = with_evidence(exchange, {}, now_ms=T0 + TIMEOUT, timeout_ms=TIMEOUT, receipts=receipts)
    assert late["answer_state"] == "incomplete"


def test_archived_entries_get_their_exchanges_state_from_the_calls_the_archive_holds() -> None:
    entries = [
        {"thread": "session:ann", "exchange_id": "x1", "entry_id": "x1.q", "role": "question"},
        {"thread": "session:ann", "exchange_id": "x1", "entry_id": "x1.t0", "role": "tool"},
        {"thread": "session:ann", "exchange_id": "x1", "entry_id": "x1.t1.c", "role": "tool", "occurred_at": T0},
        {"thread": "session:ann", "exchange_id": "x1", "entry_id": "x1.a", "role": "answer"},
    ]
    exchanges = archived_exchanges(entries)
    assert exchanges[("session:ann", "x1")].calls == {0: None, 1: T0}
    receipts = {("x1", 0): "passed", ("x1", 1): "passed", ("x1", None): "failed_expected"}
    early = [
        archived_evidence(dict(e), exchanges[("session:ann", "x1")], receipts, now_ms=T0, timeout_ms=TIMEOUT)
        for e in entries
    ]
    assert [e["answer_state"] for e in early] == ["verified"] * 4
    assert [e.get("receipt") for e in early] == [None, "passed", "passed", "failed_expected"]
    late = archived_evidence(
        dict(entries[3]), exchanges[("session:ann", "x1")], receipts, now_ms=T0 + TIMEOUT, timeout_ms=TIMEOUT
    )
    assert late["answer_state"] == "incomplete"
    # the call's result archived after it: answered
    answered = archived_exchanges(
        [*entries, {"thread": "session:ann", "exchange_id": "x1", "entry_id": "x1.t1", "role": "tool"}]
    )
    assert answered[("session:ann", "x1")].calls == {0: None, 1: None}


@st.composite
def receipts(draw: st.DrawFn) -> ReceiptRecorded:
    return ReceiptRecorded(
        draw(envelopes()),
        draw(names),
        draw(names),
        draw(st.none() | st.integers(0, 2**31 - 1)),
        draw(st.sampled_from(RECEIPT_RESULTS)),
        draw(st.none() | st.text(max_size=300)),
    )


@given(receipts())
@settings(max_examples=200, deadline=None)
def test_a_receipt_round_trips_through_avro_sealed(event: ReceiptRecorded) -> None:
    record = to_record(event)
    decoded = CODEC.decode(CODEC.encode(event.TYPE, record))
    assert from_record(decoded.full_name, decoded.record) == event
    sealed = CODEC.decode(CODEC.encode(event.TYPE, seal(event.TYPE, record, "k1", KEY)))
    _, blanks = take_personal(event.TYPE, sealed.record)
    assert all(blank in ("", None) for blank in blanks)  # the detail never travels in clear
    assert from_record(sealed.full_name, open_sealed(sealed.full_name, sealed.record, KEY)) == event
    assert PERSONAL[event.TYPE] == ("detail",)


def env(thread: str = "session", subject: str | None = "ann") -> Envelope:
    return Envelope(tenant="castle", subject=subject, agent="allay", thread=thread, producer="test")


def test_a_receipt_is_refused_with_a_result_it_does_not_know_or_a_detail_too_long() -> None:
    with pytest.raises(InvalidEvent, match="result"):
        ReceiptRecorded(env(), "rc-1", "x1", 0, "ok")
    with pytest.raises(InvalidEvent, match="detail"):
        ReceiptRecorded(env(), "rc-1", "x1", 0, "passed", "x" * 2001)
    with pytest.raises(InvalidEvent, match="call_index"):
        ReceiptRecorded(env(), "rc-1", "x1", -1, "passed")


async def a_thread(sessions: InMemorySessionStore, key: ThreadKey) -> None:
    """One answered exchange `x1` with one tool call, in the thread."""
    now = now_ms()
    call = ToolCall(0, "open_chest", "{}", '{"keys":3}', True, 5, now)
    exchange = Exchange("x1", "open it", tool_calls=(call,), answer="3 keys", occurred_at=now, tokens=2)
    change = SessionChange(exchange, False, 2, now, now + DAY_MS, count_delta=1)
    assert await sessions.write([SessionWrite(Position("threads", 0, 1), key, change)], now) == [True]


async def test_the_trace_projection_stores_a_receipt_once_per_record_and_marks_its_thread() -> None:
    sessions, traces, store = InMemorySessionStore(), InMemoryTraceStore(), InMemoryReceiptStore()
    key = ThreadKey.session("castle", "ann")
    await a_thread(sessions, key)
    step = TraceStep(traces, sessions, Redactor.build(), 7, store)
    secret = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
    receipt = ReceiptRecorded(env(), "rc-1", "x1", 0, "failed", f"paid with key {secret}")
    await step([(receipt, Position("traces", 2, 40))])
    await step([(receipt, Position("traces", 2, 40))])  # redelivered: nothing new
    (kept,) = await store.export_subject("castle", "ann")
    assert kept["result"] == "failed" and secret not in str(kept["detail"])
    (link,) = await store.served("castle", "session:ann", ["x1"], now_ms())
    assert (link["call_index"], link["receipt"], link["offset"]) == (0, "failed", 40)

    # the context read finds it in the thread's served mark: unverified, then verified by a later receipt
    evidence = Evidence(traces, TIMEOUT, store)
    sessions.now_ms = now_ms()

    async def state() -> tuple[str | None, str | None]:
        ready = await sessions.read_ready(key)
        assert ready is not None
        read = await evidence.ready_exchanges("castle", "session", "ann", ready, marked=True)
        assert read is not None
        (exchange,) = json.loads(read)
        return exchange["tool_calls"][0]["receipt"], exchange["answer_state"]

    assert await state() == ("failed", "unverified")
    later = ReceiptRecorded(env(), "rc-2", "x1", 0, "passed")
    await step([(later, Position("traces", 2, 41))])
    assert await state() == ("passed", "verified")
    assert len(await store.export_subject("castle", "ann")) == 2


def test_a_receipt_document_keeps_its_position_and_thread() -> None:
    receipt = ReceiptRecorded(env(thread="automation", subject=None), "rc-9", "x7", None, "failed_expected")
    doc = receipt_document(receipt, Position("traces", 1, 9), Redactor.build(), 7)
    assert doc["_id"] == "6:castle:1:9" and doc["exchange_thread"] == "automation:allay"
    assert doc["call_index"] is None and doc["detail"] is None


async def test_a_context_read_joins_receipts_from_the_store_until_the_marks_are_complete() -> None:
    traces, store = InMemoryTraceStore(), InMemoryReceiptStore()
    receipt = ReceiptRecorded(env(), "rc-1", "x1", None, "passed")
    await store.append([receipt_document(receipt, Position("traces", 0, 3), Redactor.build(), 7)])
    evidence = Evidence(traces, TIMEOUT, store)
    (read,) = await evidence.exchanges("castle", "session", "ann", [view({"k": 1})])
    assert (read["receipt"], read["answer_state"]) == ("passed", "unverified")  # call 0 has no receipt
