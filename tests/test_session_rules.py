"""The session's pure rules: exchanges assembled from their events, tokens counted once, expiry by event time."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.memory import MemorySessionStore
from projections.position import Position
from projections.session import Session, apply_event, fold_session, plan_batch
from projections.stores import SessionKey
from projections.tokens import TokenCounter
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent, ToolCalled, exchange_events
from tests.strategies import session_histories

TTL = 86_400_000
T0 = 1_795_000_000_000


def env(at: int = T0) -> Envelope:
    return Envelope(tenant="castle", subject="ann", thread="session", producer="test", occurred_at=at)


def test_an_exchange_holds_its_question_tool_results_and_answer(count_tokens: TokenCounter) -> None:
    events = exchange_events(
        {
            "tenant": "castle",
            "subject": "ann",
            "question": "what is in the chest?",
            "tool_calls": [{"name": "open_chest", "arguments": {"x": 1}, "result": {"diamond": 12}}],
            "answer": "12 diamonds",
        },
        producer="test",
        now=T0,
    )
    session = fold_session(events, ttl_ms=TTL, now_ms=T0, count_tokens=count_tokens)
    (exchange,) = session.exchanges
    view = exchange.view()
    assert view["question"] == "what is in the chest?"
    assert view["tool_calls"][0]["result"] == {"diamond": 12}
    assert view["answer"] == "12 diamonds"
    assert view["complete"] is True
    assert session.head.tokens == exchange.tokens > 0


def test_an_exchange_without_its_answer_shows_as_incomplete(count_tokens: TokenCounter) -> None:
    session = fold_session(
        [QuestionAsked(env(), "x1", "still thinking?")], ttl_ms=TTL, now_ms=T0, count_tokens=count_tokens
    )
    assert session.exchanges[0].complete is False
    assert session.exchanges[0].view()["answer"] is None


def test_tokens_are_counted_once_per_added_text() -> None:
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return len(text.split())

    events: list[ThreadEvent] = [
        QuestionAsked(env(), "x1", "one two three"),
        ToolCalled(env(), "x1", 0, "look", "{}", '"four"'),
        AnswerGiven(env(), "x1", "five six"),
        QuestionAsked(env(T0 + 10), "x2", "seven"),
    ]
    session = fold_session(events, ttl_ms=TTL, now_ms=T0, count_tokens=counting)
    assert len(calls) == 4  # one count per event, never the whole session again
    assert session.head.tokens == sum(e.tokens for e in session.exchanges)


def test_a_repeated_question_or_tool_call_changes_nothing(count_tokens: TokenCounter) -> None:
    question = QuestionAsked(env(), "x1", "where is my base?")
    first = apply_event(None, None, question, ttl_ms=TTL, count_tokens=count_tokens)
    assert first is not None
    assert apply_event(None, first.exchange, question, ttl_ms=TTL, count_tokens=count_tokens) is None
    call = ToolCalled(env(), "x1", 0, "find_base", "{}", '{"x": 10}')
    second = apply_event(None, first.exchange, call, ttl_ms=TTL, count_tokens=count_tokens)
    assert second is not None
    again = apply_event(None, second.exchange, call, ttl_ms=TTL, count_tokens=count_tokens)
    assert again is not None
    assert again.token_delta == 0 and again.exchange == second.exchange


def test_a_session_is_kept_ttl_after_its_last_question_by_event_time(count_tokens: TokenCounter) -> None:
    events = [QuestionAsked(env(T0), "x1", "hello")]
    assert fold_session(events, ttl_ms=TTL, now_ms=T0 + TTL - 1, count_tokens=count_tokens).exchanges
    # a replay after the TTL never revives it
    assert not fold_session(events, ttl_ms=TTL, now_ms=T0 + TTL, count_tokens=count_tokens).exchanges


def test_a_question_after_the_ttl_starts_a_fresh_session(count_tokens: TokenCounter) -> None:
    events = [QuestionAsked(env(T0), "x1", "old"), QuestionAsked(env(T0 + TTL + 1), "x2", "new")]
    session = fold_session(events, ttl_ms=TTL, now_ms=T0 + TTL + 2, count_tokens=count_tokens)
    assert [e.question for e in session.exchanges] == ["new"]


def test_tool_calls_are_kept_in_call_order_whatever_the_arrival_order(count_tokens: TokenCounter) -> None:
    events: list[ThreadEvent] = [
        QuestionAsked(env(), "x1", "q"),
        ToolCalled(env(), "x1", 1, "second", "{}", "2"),
        ToolCalled(env(), "x1", 0, "first", "{}", "1"),
    ]
    session = fold_session(events, ttl_ms=TTL, now_ms=T0, count_tokens=count_tokens)
    assert [c.name for c in session.exchanges[0].tool_calls] == ["first", "second"]


async def _apply_all(
    store: MemorySessionStore, events: list[ThreadEvent], now: int, count: TokenCounter, offsets: list[int], batch: int
) -> None:
    """What the session agent does: load a batch's state, plan it purely, write it."""
    positioned = [(events[offset], Position("threads", 0, offset)) for offset in offsets]
    for start in range(0, len(positioned), batch):
        run = positioned[start : start + batch]
        wanted = list(dict.fromkeys((SessionKey("t", "s"), event.exchange_id) for event, _ in run))
        loaded = await store.load(wanted)
        await store.write(plan_batch(run, loaded, ttl_ms=TTL, now_ms=now, count_tokens=count), now)


def _same(a: Session | None, b: Session) -> bool:
    if a is None:
        return not b.exchanges
    return a.exchanges == b.exchanges and a.head.tokens == b.head.tokens


@given(session_histories(TTL), st.data())
@settings(max_examples=150, deadline=None)
async def test_batched_application_with_redelivery_equals_the_pure_fold(
    events: list[ThreadEvent], data: st.DataObject
) -> None:
    count: TokenCounter = len  # the rule only needs a pure counter
    now = events[-1].envelope.occurred_at
    expected = fold_session(events, ttl_ms=TTL, now_ms=now, count_tokens=count)
    # deliver in order, but re-deliver an arbitrary earlier stretch (a crash before the commit)
    crash_at = data.draw(st.integers(0, len(events)))
    resume_from = data.draw(st.integers(0, crash_at))
    offsets = list(range(crash_at)) + list(range(resume_from, len(events)))
    store = MemorySessionStore()
    store.now_ms = now
    await _apply_all(store, events, now, count, offsets, data.draw(st.integers(1, 8)))
    assert _same(await store.read(SessionKey("t", "s")), expected)


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"tenant": "", "subject": "s", "question": "q"}, "tenant"),
        ({"tenant": "t", "subject": "a\x00b", "question": "q"}, "subject"),
        ({"tenant": "t", "subject": "s", "question": ""}, "question"),
        ({"tenant": "t", "subject": "s", "question": "q", "channel": "v9"}, "channel"),
        (
            {"tenant": "t", "subject": "s", "question": "q", "tool_calls": [{"name": "x", "ok": "yes"}]},
            "tool_calls[0].ok",
        ),
        ({"tenant": "t", "subject": "s", "question": "q", "tool_calls": [{"arguments": {}}]}, "tool_calls[0].name"),
        ({"tenant": "t", "subject": "s", "question": "q", "colour": "red"}, "colour"),
        ({"tenant": "t", "subject": "s", "question": "q", "occurred_at": -5}, "occurred_at"),
        (
            {"tenant": "t", "subject": "s", "question": "q", "tool_calls": [{"name": "x", "result": float("nan")}]},
            "tool_calls[0].result",
        ),
    ],
)
def test_invalid_exchanges_are_refused_naming_the_field(payload: dict[str, object], field: str) -> None:
    from memlog.errors import InvalidEvent

    with pytest.raises(InvalidEvent) as caught:
        exchange_events(payload, producer="test")
    assert caught.value.field == field


def test_a_retried_exchange_keeps_its_id() -> None:
    payload = {"tenant": "t", "subject": "s", "question": "q", "idempotency_key": "k1"}
    first = exchange_events(payload, producer="p")[0]
    second = exchange_events(payload, producer="p")[0]
    other_tenant = exchange_events({**payload, "tenant": "u"}, producer="p")[0]
    assert first.exchange_id == second.exchange_id != other_tenant.exchange_id
    assert json.loads(json.dumps(first.exchange_id)) == first.exchange_id
