"""The thread rules of seed 000, pure: exchanges, tokens, TTLs by event time, folds, the other threads."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlog.adapters.in_memory import InMemorySessionStore
from projections.position import Position
from projections.session import (
    Exchange,
    Session,
    SessionHead,
    ThreadKey,
    ThreadPolicy,
    apply_event,
    event_exchange_ids,
    fold_session,
    needs_fold,
    plan_batch,
    plan_fold,
    thread_key,
)
from projections.summary import extractive_summary
from projections.tokens import TokenCounter
from schemas.errors import InvalidEvent
from schemas.events import (
    AnswerGiven,
    Envelope,
    QuestionAsked,
    ThreadEvent,
    ThreadFolded,
    ThreadReset,
    ToolCalled,
)
from schemas.exchanges import ReportedExchange, exchange_events
from tests.unit.strategies import session_histories

POLICY = ThreadPolicy()
TTL = POLICY.session_ttl_ms
T0 = 1_795_000_000_000
KEY = ThreadKey.session("castle", "ann")


def env(at: int = T0, thread: str = "session", subject: str | None = "ann", agent: str | None = None) -> Envelope:
    return Envelope(tenant="castle", subject=subject, agent=agent, thread=thread, producer="test", occurred_at=at)


def fold(events: Sequence[ThreadEvent], now: int, count: TokenCounter, policy: ThreadPolicy = POLICY) -> Session:
    return fold_session(events, policy=policy, now_ms=now, count_tokens=count).get(KEY, Session())


def words(text: str) -> int:
    return len(text.split())


def test_an_exchange_holds_its_question_tool_results_and_answer(count_tokens: TokenCounter) -> None:
    events = exchange_events(
        ReportedExchange.from_payload(
            {
                "tenant": "castle",
                "subject": "ann",
                "question": "what is in the chest?",
                "tool_calls": [{"name": "open_chest", "arguments": {"x": 1}, "result": {"diamond": 12}}],
                "answer": "12 diamonds",
            }
        ),
        producer="test",
        now=T0,
    )
    session = fold(events, T0, count_tokens)
    (exchange,) = session.exchanges
    view = exchange.view()
    assert view["question"] == "what is in the chest?"
    assert view["tool_calls"][0]["result"] == {"diamond": 12}
    assert view["answer"] == "12 diamonds" and view["complete"] is True
    assert session.head.tokens == exchange.tokens > 0 and session.head.count == 1


def test_an_exchange_without_its_answer_shows_as_incomplete(count_tokens: TokenCounter) -> None:
    session = fold([QuestionAsked(env(), "x1", "still thinking?")], T0, count_tokens)
    assert session.exchanges[0].complete is False
    assert session.exchanges[0].view()["answer"] is None


def test_v1_and_v2_exchanges_share_the_session(count_tokens: TokenCounter) -> None:
    events = [QuestionAsked(env(), "x1", "from v1", "v1"), QuestionAsked(env(), "x2", "from v2", "v2")]
    assert [e.channel for e in fold(events, T0, count_tokens).exchanges] == ["v1", "v2"]


def test_an_askx_exchange_lands_as_one_line(count_tokens: TokenCounter) -> None:
    events: list[ThreadEvent] = [
        QuestionAsked(env(), "x1", "build a tower", "askx"),
        ToolCalled(env(), "x1", 0, "plan", "{}", '"ok"'),
        AnswerGiven(env(), "x1", "/fill 0 64 0 0 80 0 stone"),
    ]
    (exchange,) = fold(events, T0, count_tokens).exchanges
    assert exchange.render() == "askx: build a tower -> /fill 0 64 0 0 80 0 stone\n"
    assert exchange.view()["line"] == "askx: build a tower -> /fill 0 64 0 0 80 0 stone"


def test_tokens_are_counted_once_per_added_text() -> None:
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return words(text)

    events: list[ThreadEvent] = [
        QuestionAsked(env(), "x1", "one two three"),
        ToolCalled(env(), "x1", 0, "look", "{}", '"four"'),
        AnswerGiven(env(), "x1", "five six"),
        QuestionAsked(env(T0 + 10), "x2", "seven"),
    ]
    session = fold(events, T0, counting)
    assert len(calls) == 4  # one count per event, never the whole session again
    assert session.head.tokens == sum(e.tokens for e in session.exchanges)


def test_a_repeated_question_or_tool_call_changes_nothing(count_tokens: TokenCounter) -> None:
    question = QuestionAsked(env(), "x1", "where is my base?")
    first = apply_event(None, None, question, ttl_ms=TTL, count_tokens=count_tokens)
    assert first is not None and first.exchange is not None
    assert apply_event(None, first.exchange, question, ttl_ms=TTL, count_tokens=count_tokens) is None
    call = ToolCalled(env(), "x1", 0, "find_base", "{}", '{"x": 10}')
    second = apply_event(None, first.exchange, call, ttl_ms=TTL, count_tokens=count_tokens)
    assert second is not None and second.exchange is not None
    again = apply_event(None, second.exchange, call, ttl_ms=TTL, count_tokens=count_tokens)
    assert again is not None
    assert again.token_delta == 0 and again.exchange == second.exchange and again.count_delta == 0


def test_a_session_is_kept_ttl_after_its_last_question_by_event_time(count_tokens: TokenCounter) -> None:
    events = [QuestionAsked(env(T0), "x1", "hello")]
    assert fold(events, T0 + TTL - 1, count_tokens).exchanges
    assert not fold(events, T0 + TTL, count_tokens).exchanges  # a replay after the TTL never revives it


def test_a_question_after_the_ttl_starts_a_fresh_session(count_tokens: TokenCounter) -> None:
    events = [QuestionAsked(env(T0), "x1", "old"), QuestionAsked(env(T0 + TTL + 1), "x2", "new")]
    assert [e.question for e in fold(events, T0 + TTL + 2, count_tokens).exchanges] == ["new"]


def test_public_and_automation_threads_live_two_hours_apart_from_the_session(count_tokens: TokenCounter) -> None:
    events: list[ThreadEvent] = [
        QuestionAsked(env(T0, "public", "ann"), "p1", "where is spawn?", asker="Ann"),
        QuestionAsked(env(T0, "automation", None, "miner"), "a1", "wake: mine iron"),
        QuestionAsked(env(T0), "s1", "mine"),
    ]
    threads = fold_session(events, policy=POLICY, now_ms=T0 + 7_200_000 - 1, count_tokens=count_tokens)
    assert set(threads) == {KEY, ThreadKey.public("castle"), ThreadKey.automation("castle", "miner")}
    later = fold_session(events, policy=POLICY, now_ms=T0 + 7_200_000, count_tokens=count_tokens)
    assert set(later) == {KEY}


def test_the_public_thread_prefixes_the_asker_and_keeps_no_tool_results(count_tokens: TokenCounter) -> None:
    public = env(T0, "public", "ann")
    events: list[ThreadEvent] = [
        QuestionAsked(public, "p1", "how many diamonds do I have?", asker="Ann"),
        ToolCalled(public, "p1", 0, "inventory", "{}", '{"diamond": 12}'),
        AnswerGiven(public, "p1", "You have 12."),
        QuestionAsked(env(T0, "public", "bob"), "p2", "and me?"),
    ]
    session = fold_session(events, policy=POLICY, now_ms=T0, count_tokens=count_tokens)[ThreadKey.public("castle")]
    first, second = session.exchanges
    assert first.question == "Ann: how many diamonds do I have?"
    assert second.question == "bob: and me?"  # no display name: the subject
    assert first.tool_calls == () and first.answer == "You have 12."
    assert "diamond" not in session.render().replace("diamonds do I", "")


def test_a_reset_empties_the_session_and_a_new_exchange_starts_it_again(count_tokens: TokenCounter) -> None:
    events: list[ThreadEvent] = [
        QuestionAsked(env(T0), "x1", "old"),
        ThreadFolded(env(T0 + 1), "f1", "summary", ("x1",), "extractive"),
        QuestionAsked(env(T0 + 2), "x2", "older"),
        ThreadReset(env(T0 + 3), "/allay new"),
        QuestionAsked(env(T0 + 4), "x3", "new"),
    ]
    session = fold(events, T0 + 5, count_tokens)
    assert [e.question for e in session.exchanges] == ["new"]
    assert session.head.summary == "" and session.head.tokens == session.exchanges[0].tokens


def exchanges_of(tokens: Sequence[int], complete: bool = True) -> Session:
    exchanges = tuple(
        Exchange(f"x{i}", f"q{i}", answer="a" if complete else None, tokens=t) for i, t in enumerate(tokens)
    )
    return Session(SessionHead(tokens=sum(tokens), count=len(tokens), last_question_at=T0), exchanges)


def test_a_fold_starts_past_32000_tokens_or_100_exchanges() -> None:
    assert not needs_fold(SessionHead(tokens=32_000, count=10), POLICY)
    assert needs_fold(SessionHead(tokens=32_001, count=10), POLICY)
    assert not needs_fold(SessionHead(tokens=100, count=100), POLICY)
    assert needs_fold(SessionHead(tokens=100, count=101), POLICY)


def test_a_fold_keeps_the_newest_12000_tokens() -> None:
    session = exchanges_of([1_000] * 40)  # 40,000 tokens
    folded = plan_fold(session, POLICY)
    assert len(folded) == 28 and folded[0].exchange_id == "x0"  # 12 newest stay: 12,000 tokens


def test_a_fold_keeps_at_least_two_exchanges_however_large() -> None:
    folded = plan_fold(exchanges_of([10_000, 10_000, 10_000, 10_000]), POLICY)
    assert [e.exchange_id for e in folded] == ["x0", "x1"]


def test_a_fold_keeps_at_most_thirty_exchanges_however_small() -> None:
    folded = plan_fold(exchanges_of([10] * 101), POLICY)  # past 100 exchanges, 1,010 tokens
    assert len(folded) == 71


def test_a_fold_never_takes_an_unanswered_exchange() -> None:
    session = exchanges_of([1_000] * 40)
    waiting = Exchange("x5", "q5", answer=None, tokens=1_000)
    session = Session(session.head, (*session.exchanges[:5], waiting, *session.exchanges[6:]))
    assert [e.exchange_id for e in plan_fold(session, POLICY)] == ["x0", "x1", "x2", "x3", "x4"]


def test_a_summary_never_passes_3000_characters() -> None:
    many = [Exchange(f"x{i}", "q" * 500, answer="a" * 500) for i in range(70)]
    assert len(extractive_summary("p" * 5_000, many, POLICY.summary_chars)) <= 3_000
    assert len(extractive_summary("", many, POLICY.summary_chars)) <= 3_000


def test_a_fact_from_exchange_three_survives_two_folds(count_tokens: TokenCounter) -> None:
    policy = ThreadPolicy(fold_exchanges=10, keep_max=4)
    events: list[ThreadEvent] = []
    session = Session()
    summaries = []
    for number in range(1, 30):
        at = T0 + number
        question = "my base is at 100 64 -20" if number == 3 else f"what about block {number}?"
        events += [QuestionAsked(env(at), f"x{number}", question), AnswerGiven(env(at), f"x{number}", "noted")]
        session = fold(events, at, count_tokens, policy)
        folded = plan_fold(session, policy)
        if folded:
            summary = extractive_summary(session.head.summary, folded, policy.summary_chars)
            covers = tuple(e.exchange_id for e in folded)
            events.append(ThreadFolded(env(at), f"f{number}", summary, covers, "extractive"))
            summaries.append(summary)
    session = fold(events, T0 + 30, count_tokens, policy)
    assert len(summaries) >= 2
    assert all("my base is at 100 64 -20" in summary for summary in summaries)
    assert "my base is at 100 64 -20" in session.head.summary
    assert session.head.count <= policy.fold_exchanges


def test_a_fold_replaces_its_exchanges_and_is_applied_once(count_tokens: TokenCounter) -> None:
    events: list[ThreadEvent] = [QuestionAsked(env(T0 + i), f"x{i}", f"question {i}") for i in range(4)]
    folded = ThreadFolded(env(T0 + 5), "f1", "asked four questions", ("x0", "x1"), "extractive")
    session = fold([*events, folded, folded], T0 + 6, count_tokens)
    assert [e.exchange_id for e in session.exchanges] == ["x2", "x3"]
    assert session.head.summary == "asked four questions"
    assert session.head.tokens == sum(e.tokens for e in session.exchanges) + count_tokens("asked four questions")


def test_the_rendered_context_only_grows_at_the_end_across_50_exchanges(count_tokens: TokenCounter) -> None:
    events: list[ThreadEvent] = [
        QuestionAsked(env(T0), "x0", "first"),
        ThreadFolded(env(T0), "f0", "the base is at 100 64 -20", ("x0",), "extractive"),
    ]
    before = fold(events, T0, count_tokens).render()
    for number in range(1, 51):
        at = T0 + number
        for event in exchange_events(
            ReportedExchange.from_payload(
                {
                    "tenant": "castle",
                    "subject": "ann",
                    "question": f"question {number}",
                    "tool_calls": [{"name": "look", "result": {"n": number}}],
                    "answer": f"answer {number}",
                    "exchange_id": f"x{number}",
                    "channel": "askx" if number % 7 == 0 else "v2",
                }
            ),
            producer="test",
            now=at,
        ):
            events.append(event)
            after = fold(events, at, count_tokens).render()
            assert after.startswith(before)
            before = after
    assert before.startswith("Summary of the earlier conversation:\nthe base is at 100 64 -20\n\n")


async def _apply_all(
    store: InMemorySessionStore,
    events: list[ThreadEvent],
    now: int,
    count: TokenCounter,
    offsets: list[int],
    batch: int,
) -> None:
    """What the session agent does: load a batch's state, plan it purely, write it."""
    positioned = [(events[offset], Position("threads", 0, offset)) for offset in offsets]
    for start in range(0, len(positioned), batch):
        run = positioned[start : start + batch]
        wanted = list(
            dict.fromkeys(
                (thread_key(event), exchange_id)
                for event, _ in run
                for exchange_id in (event_exchange_ids(event) or ("",))
            )
        )
        loaded = await store.load(wanted)
        await store.write(plan_batch(run, loaded, policy=POLICY, now_ms=now, count_tokens=count).writes, now)


@given(session_histories(TTL), st.data())
@settings(max_examples=150, deadline=None)
async def test_batched_application_with_redelivery_equals_the_pure_fold(
    events: list[ThreadEvent], data: st.DataObject
) -> None:
    now = events[-1].envelope.occurred_at
    expected = fold_session(events, policy=POLICY, now_ms=now, count_tokens=words)
    # deliver in order, but re-deliver an arbitrary earlier stretch (a crash before the commit)
    crash_at = data.draw(st.integers(0, len(events)))
    resume_from = data.draw(st.integers(0, crash_at))
    offsets = list(range(crash_at)) + list(range(resume_from, len(events)))
    store = InMemorySessionStore()
    store.now_ms = now
    await _apply_all(store, events, now, words, offsets, data.draw(st.integers(1, 8)))
    for key in {thread_key(event) for event in events}:
        stored = await store.read(key)
        if key in expected:
            assert stored == expected[key]
        else:
            assert stored is None or not stored.exchanges


async def test_a_redelivered_question_of_an_expired_session_does_not_come_back_to_be_folded() -> None:
    """Found by the property above: a fold of an exchange gone with its expired session changes nothing,
    even when the question, the next one and the fold are delivered again (idempotent by offset across a TTL)."""
    late = T0 + TTL + 1  # x0's session has expired: x1 starts afresh
    events: list[ThreadEvent] = [
        QuestionAsked(env(T0), "x0", "unanswered"),
        QuestionAsked(env(late), "x1", "again"),
        ThreadFolded(env(late), "f1", "summary", ("x0",), "extractive"),
        QuestionAsked(env(late), "x2", "and again"),
    ]
    expected = fold(events, late, words)
    assert [e.exchange_id for e in expected.exchanges] == ["x1", "x2"] and expected.head.folded is None
    for batch in (1, 2, 3, 8):
        store = InMemorySessionStore()
        store.now_ms = late
        await _apply_all(store, events, late, words, [0, 1, 2, 0, 1, 2, 3], batch)
        assert await store.read(KEY) == expected


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
        ({"tenant": "t", "subject": "s", "question": "q", "thread": "automation"}, "agent"),
        ({"tenant": "t", "subject": "s", "question": "q", "thread": "diary"}, "thread"),
        (
            {"tenant": "t", "subject": "s", "question": "q", "tool_calls": [{"name": "x", "result": float("nan")}]},
            "tool_calls[0].result",
        ),
    ],
)
def test_invalid_exchanges_are_refused_naming_the_field(payload: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidEvent) as caught:
        exchange_events(ReportedExchange.from_payload(payload), producer="test")
    assert caught.value.field == field


def test_a_retried_exchange_keeps_its_id() -> None:
    payload = {"tenant": "t", "subject": "s", "question": "q", "idempotency_key": "k1"}
    first = exchange_events(ReportedExchange.from_payload(payload), producer="p")[0]
    second = exchange_events(ReportedExchange.from_payload(payload), producer="p")[0]
    other_tenant = exchange_events(ReportedExchange.from_payload({**payload, "tenant": "u"}), producer="p")[0]
    assert first.exchange_id == second.exchange_id != other_tenant.exchange_id
    assert json.loads(json.dumps(first.exchange_id)) == first.exchange_id
