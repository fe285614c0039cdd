"""Tokens counted once (issue 16, item 3): an exchange event carries the token count of the text it adds
to its session, counted when it is produced; the session projection uses it and never counts that text
again, and events without a count (older versions) are counted on read, to the same session."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.position import Position
from projections.session import ThreadPolicy, apply_event, event_exchange_ids, fold_session, plan_batch, thread_key
from projections.tokens import TokenCounter, load_encoding
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.errors import InvalidEvent
from schemas.events import (
    AnswerGiven,
    Envelope,
    ExchangeEvent,
    QuestionAsked,
    ThreadEvent,
    ThreadFolded,
    ToolCalled,
    from_record,
    to_record,
)
from schemas.exchanges import (
    OFF_LOOP_CHARS,
    AnswerPart,
    QuestionPart,
    ReportedExchange,
    Route,
    ToolCallPart,
    ToolUse,
    exchange_events,
    part_event,
    text_size,
)
from schemas.session_text import added_text, count_of
from tests.unit.strategies import json_values, names, session_histories, texts

POLICY = ThreadPolicy()
TTL = POLICY.session_ttl_ms
T0 = 1_795_000_000_000
COUNT = TokenCounter(load_encoding("cl100k_base"))  # the session's tokenizer, as the API and the worker build it
FIXTURES = Path(__file__).parents[1] / "fixtures" / "avro"
CODEC = Codec(Catalog())
EXCHANGE_EVENTS = (QuestionAsked, ToolCalled, AnswerGiven)


def carrying(event: ThreadEvent) -> ThreadEvent:
    """The event as a producer with the tokenizer builds it: with its text's count."""
    if isinstance(event, EXCHANGE_EVENTS):
        return replace(event, tokens=count_of(added_text(event), COUNT))
    return event


class Recorder:
    """A counter that keeps every text it was asked to count (a plain function, no service behind it)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, text: str) -> int:
        self.texts.append(text)
        return COUNT(text)


@st.composite
def histories(draw: st.DrawFn) -> list[ThreadEvent]:
    """Session and public-thread histories with what makes `added` differ from an event's own text:
    redelivered events, a tool call's result sent after the call (it replaces it), answers sent twice."""
    events: list[ThreadEvent] = []
    for event in draw(session_histories(TTL)):
        events.append(event)
        if isinstance(event, ToolCalled) and draw(st.booleans()):
            events.append(replace(event, result=json.dumps(draw(json_values))))  # replaces the call
        if isinstance(event, AnswerGiven) and draw(st.booleans()):
            events.append(replace(event, answer=draw(texts)))  # a second answer: the first one counted
        if draw(st.integers(0, 4)) == 0:
            events.append(event)  # redelivered
    return events


@given(histories(), st.data())
@settings(max_examples=200, deadline=None)
def test_a_session_folded_from_carried_counts_equals_one_counted_on_read(
    events: list[ThreadEvent], data: st.DataObject
) -> None:
    now = events[-1].envelope.occurred_at
    counted = fold_session(events, policy=POLICY, now_ms=now, count_tokens=COUNT)
    carried = fold_session([carrying(e) for e in events], policy=POLICY, now_ms=now, count_tokens=COUNT)
    assert carried == counted
    # a log of old and new versions mixed (a producer upgraded mid-stream) folds to the same session too
    mixed = [carrying(e) if data.draw(st.booleans()) else e for e in events]
    assert fold_session(mixed, policy=POLICY, now_ms=now, count_tokens=COUNT) == counted


@given(histories(), st.integers(1, 8))
@settings(max_examples=100, deadline=None)
def test_the_projection_never_counts_an_exchange_event_that_carries_its_count(
    events: list[ThreadEvent], batch: int
) -> None:
    now = events[-1].envelope.occurred_at
    recorder = Recorder()
    carried = [carrying(e) for e in events]
    fold_session(carried, policy=POLICY, now_ms=now, count_tokens=recorder)
    positioned = [(event, Position("threads", 0, offset)) for offset, event in enumerate(carried)]
    for start in range(0, len(positioned), batch):  # the live and replay path: one plan per batch
        plan_batch(positioned[start : start + batch], {}, policy=POLICY, now_ms=now, count_tokens=recorder)
    summaries = {e.summary for e in events if isinstance(e, ThreadFolded)}
    assert set(recorder.texts) <= summaries  # only fold summaries are counted; no exchange text ever is


def test_events_without_a_count_are_counted_on_read_once_each() -> None:
    recorder = Recorder()
    env = Envelope(tenant="castle", subject="ann", thread="public", producer="test", occurred_at=T0)
    events: list[ThreadEvent] = [
        QuestionAsked(env, "x1", "where is my base?", asker="Ann"),
        AnswerGiven(env, "x1", "at 100 64 -20"),
        QuestionAsked(env, "x2", "and mine?", asker="Bob", tokens=COUNT("Bob: and mine?")),
    ]
    fold_session(events, policy=POLICY, now_ms=T0, count_tokens=recorder)
    assert recorder.texts == ["Ann: where is my base?", "at 100 64 -20"]


def test_a_carried_count_is_the_one_the_session_adds() -> None:
    """The projection trusts the count it is given for the text it adds: it is that text's count."""
    env = Envelope(tenant="castle", subject="ann", thread="session", producer="test", occurred_at=T0)
    question = QuestionAsked(env, "x1", "where is my base?", tokens=3)
    change = apply_event(None, None, question, ttl_ms=TTL, count_tokens=COUNT)
    assert change is not None and change.token_delta == 3 and change.exchange is not None
    call = ToolCalled(env, "x1", 0, "look", "{}", '"north"', tokens=4)
    after_call = apply_event(None, change.exchange, call, ttl_ms=TTL, count_tokens=COUNT)
    assert after_call is not None and after_call.token_delta == 4 and after_call.exchange is not None
    # the call's result sent again replaces it: it adds nothing, whatever it carries
    again = apply_event(
        None, after_call.exchange, replace(call, result='"south"', tokens=5), ttl_ms=TTL, count_tokens=COUNT
    )
    assert again is not None and again.token_delta == 0


@st.composite
def reported(draw: st.DrawFn) -> ReportedExchange:
    thread = draw(st.sampled_from(["session", "public", "automation"]))
    # a lone surrogate is replaced before the event is built; the count is of the text as built
    question = draw(texts.filter(lambda t: bool(t.strip())) | st.just("where\ud800 is it?"))
    payload = {
        "tenant": "castle",
        "subject": "ann",
        "thread": thread,
        "agent": "allay" if thread == "automation" else None,
        "question": question,
        "asker": draw(st.none() | names.filter(lambda n: n.isprintable())),
        "tool_calls": [
            {"name": draw(names.filter(str.isprintable)), "arguments": draw(json_values), "result": draw(json_values)}
            for _ in range(draw(st.integers(0, 2)))
        ],
        "answer": draw(st.none() | texts),
    }
    return ReportedExchange.from_payload(payload)


def _counted_as_added(event: ExchangeEvent) -> bool:
    text = added_text(event)
    return event.tokens == (COUNT(text) if text else 0)


@given(reported())
@settings(max_examples=150, deadline=None)
def test_the_producer_carries_the_count_of_exactly_the_text_the_session_adds(exchange: ReportedExchange) -> None:
    events = exchange_events(exchange, producer="test", count_tokens=COUNT)
    assert all(_counted_as_added(event) for event in events)
    assert all(e.tokens is None for e in exchange_events(exchange, producer="test"))  # no tokenizer: none carried
    # the streamed routes build the same events part by part
    route, exchange_id = exchange.route, events[0].exchange_id
    parts = [
        QuestionPart(route, exchange.question, asker=exchange.asker),
        *(ToolCallPart(route, index, call) for index, call in enumerate(exchange.tool_calls)),
        *([AnswerPart(route, exchange.answer)] if exchange.answer is not None else []),
    ]
    streamed = [part_event(exchange_id, part, producer="test", count_tokens=COUNT) for part in parts]
    assert all(_counted_as_added(event) for event in streamed)
    assert [e.tokens for e in streamed] == [e.tokens for e in events]


def test_a_public_question_is_counted_with_its_askers_name() -> None:
    route = Route(tenant="castle", subject="ann", thread="public")
    (question,) = exchange_events(ReportedExchange(route, "and mine?", asker="Bob"), producer="t", count_tokens=COUNT)
    assert question.tokens == COUNT("Bob: and mine?") != COUNT("and mine?")
    (call,) = [
        part_event("x", ToolCallPart(route, 0, ToolUse("look", {"at": 1}, [2])), producer="t", count_tokens=COUNT)
    ]
    assert call.tokens == COUNT('tool look({"at":1}): [2]')


def test_new_versions_round_trip_with_their_count() -> None:
    env = Envelope(tenant="castle", subject="ann", thread="session", producer="test", occurred_at=T0)
    for event in (
        QuestionAsked(env, "x1", "where is my base?", tokens=5),
        ToolCalled(env, "x1", 0, "look", "{}", '"north"', tokens=7),
        AnswerGiven(env, "x1", "north", tokens=1),
    ):
        decoded = CODEC.decode(CODEC.encode(event.TYPE, to_record(event)))
        assert decoded.record["tokens"] == event.tokens
        assert from_record(decoded.full_name, decoded.record) == event


@pytest.mark.parametrize(
    "path",
    [
        *sorted(FIXTURES.glob("v[12]/memlog.QuestionAsked.bin")),
        FIXTURES / "v3" / "memlog.QuestionAsked.bin",
        *sorted(FIXTURES.glob("v[12]/memlog.ToolCalled.bin")),
        *sorted(FIXTURES.glob("v[12]/memlog.AnswerGiven.bin")),
    ],
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_old_versions_decode_without_a_count_and_are_counted_on_read(path: Path) -> None:
    decoded = CODEC.decode(path.read_bytes())
    event = from_record(decoded.full_name, decoded.record)
    assert isinstance(event, EXCHANGE_EVENTS) and event.tokens is None
    recorder = Recorder()
    key = thread_key(event)
    loaded = {(key, exchange_id): (None, None) for exchange_id in event_exchange_ids(event)}
    plan = plan_batch([(event, Position("threads", 0, 0))], loaded, policy=POLICY, now_ms=0, count_tokens=recorder)
    assert recorder.texts == [added_text(event)]
    assert plan.writes[0].change is not None and plan.writes[0].change.token_delta == COUNT(added_text(event))


def test_the_current_fixtures_carry_their_count() -> None:
    for name, version in (("QuestionAsked", 4), ("ToolCalled", 3), ("AnswerGiven", 3)):
        decoded = CODEC.decode((FIXTURES / f"v{version}" / f"memlog.{name}.bin").read_bytes())
        event = from_record(decoded.full_name, decoded.record)
        assert isinstance(event, EXCHANGE_EVENTS)
        assert event.tokens == COUNT(added_text(event))


@pytest.mark.parametrize("tokens", [-1, True, 1.5, 2**63, 4 * len("where is my base?ann") + 100])
def test_an_impossible_count_is_refused_naming_the_field(tokens: object) -> None:
    env = Envelope(tenant="castle", subject="ann", thread="session", producer="test", occurred_at=T0)
    with pytest.raises(InvalidEvent) as refused:
        QuestionAsked(env, "x1", "where is my base?", tokens=tokens)  # type: ignore[arg-type]
    assert refused.value.field == "tokens"
    # on the log, from another producer: the record is refused when read (poison, not a broken session)
    record = to_record(QuestionAsked(env, "x1", "where is my base?"))
    with pytest.raises(InvalidEvent, match="tokens"):
        from_record("memlog.QuestionAsked", {**record, "tokens": 10_000})


def test_a_large_exchange_is_measured_by_its_text_as_received() -> None:
    """Past OFF_LOOP_CHARS its events are built (and counted) off the event loop."""
    route = Route(tenant="castle", subject="ann")
    assert text_size(ReportedExchange(route, "short")) < OFF_LOOP_CHARS
    assert text_size(ReportedExchange(route, "short", original="x" * OFF_LOOP_CHARS)) == OFF_LOOP_CHARS
    assert text_size(ReportedExchange(route, "short", tool_calls=(ToolUse("look"),))) >= OFF_LOOP_CHARS
    assert text_size(ToolCallPart(route, 0, ToolUse("look"))) >= OFF_LOOP_CHARS  # JSON values: not yet text
    assert text_size(AnswerPart(route, "a" * 10)) == 10
