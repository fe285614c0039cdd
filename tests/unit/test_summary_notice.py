"""Loss notices (seed 004, "Compression and prompt context"): a summary says it is lossy, what it folded away
and the thread's search route for the exact words, once, at the summary. Pure rules only."""

from __future__ import annotations

from collections.abc import Sequence

from memlog.adapters.redis_store import _head
from projections.folded import Folded, fold_more, search_route, summary_notice
from projections.session import (
    Segment,
    Session,
    SessionHead,
    ThreadKey,
    ThreadPolicy,
    fold_session,
)
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent, ThreadFolded, ThreadReset

T0 = 1_795_000_000_000
KEY = ThreadKey.session("castle", "ann")
ROUTE = "/v1/tenants/castle/threads/session:ann/search?q="
NOTICE = "[Lossy "


def words(text: str) -> int:
    return len(text.split())


def env(at: int) -> Envelope:
    return Envelope(tenant="castle", subject="ann", thread="session", producer="test", occurred_at=at)


def exchange(number: int) -> list[ThreadEvent]:
    at = T0 + number * 1000
    return [
        QuestionAsked(env(at), f"x{number}", f"question {number} about the red chest"),
        AnswerGiven(env(at), f"x{number}", f"answer {number}"),
    ]


def fold(events: Sequence[ThreadEvent]) -> Session:
    sessions = fold_session(events, policy=ThreadPolicy(), now_ms=T0 + 100_000, count_tokens=words)
    return sessions.get(KEY, Session())


def folded(fold_id: str, covers: tuple[str, ...], summary: str, summarizer: str = "extractive") -> ThreadFolded:
    return ThreadFolded(env(T0 + 50_000), fold_id, summary, covers, summarizer)


def test_no_fold_no_notice() -> None:
    session = fold([*exchange(0), *exchange(1)])
    assert session.head.notice(KEY) is None
    assert NOTICE not in session.render(KEY) and "Summary" not in session.render(KEY)


def test_a_fold_shows_the_notice_once_at_the_summary() -> None:
    session = fold([*exchange(0), *exchange(1), *exchange(2), folded("f1", ("x0", "x1"), "- asked 0 and 1")])
    notice = session.head.notice(KEY)
    assert notice is not None
    assert notice.view() == {
        "lossy": True,
        "summarizer": "extractive",
        "folded_exchanges": 2,
        "folded_tokens": 2 * (6 + 2),  # "question N about the red chest" + "answer N"
        "complete": True,
        "search": ROUTE,
        "since": T0,
        "until": T0 + 1000,
    }
    rendered = session.render(KEY)
    assert rendered.count(NOTICE) == 1 and rendered.count(ROUTE) == 1
    header, line, summary, rest = rendered.split("\n", 3)
    assert header == "Summary of the earlier conversation:"
    assert line.startswith("[Lossy extractive summary: 2 earlier exchanges (about 16 tokens) from ")
    assert line.endswith(f"search this thread: GET {ROUTE}<words>]")
    assert summary == "- asked 0 and 1" and rest.startswith("\nQ: question 2")


def test_a_second_fold_gives_one_notice_covering_everything_folded() -> None:
    events = [*(event for number in range(5) for event in exchange(number))]
    events += [folded("f1", ("x0", "x1"), "first"), folded("f2", ("x2", "x3"), "second", "openai:tiny")]
    session = fold(events)
    notice = session.head.notice(KEY)
    assert notice is not None
    assert (notice.folded_exchanges, notice.folded_tokens) == (4, 32)
    assert (notice.since, notice.until, notice.summarizer) == (T0, T0 + 3000, "openai:tiny")
    rendered = session.render(KEY)
    assert rendered.count(NOTICE) == 1
    assert "[Lossy model (openai:tiny) summary: 4 earlier exchanges" in rendered


def test_between_folds_the_rendered_context_with_its_notice_only_grows_at_the_end() -> None:
    events = [*exchange(0), *exchange(1), folded("f1", ("x0",), "first")]
    before = fold(events).render(KEY)
    for number in range(2, 12):
        for event in exchange(number):
            events.append(event)
            after = fold(events).render(KEY)
            assert after.startswith(before)
            before = after
    assert before.count(NOTICE) == 1


def test_a_reset_takes_the_notice_with_the_summary() -> None:
    events = [*exchange(0), *exchange(1), folded("f1", ("x0",), "first"), ThreadReset(env(T0 + 60_000))]
    events += exchange(70)
    session = fold(events)
    assert session.head.folded is None and session.head.notice(KEY) is None
    assert NOTICE not in session.render(KEY)


def test_without_the_thread_the_rendering_is_the_old_one() -> None:
    session = fold([*exchange(0), *exchange(1), folded("f1", ("x0",), "first")])
    assert session.render().startswith("Summary of the earlier conversation:\nfirst\n\nQ: question 1")


def test_a_session_stored_before_notices_reads_and_renders_as_before() -> None:
    raw = {b"summary": b"an old summary", b"stokens": b"3", b"tokens": b"10", b"count": b"0", b"last_q": b"1"}
    head = _head(raw)
    assert head.folded is None and head.notice(KEY) is None
    assert Session(head).render(KEY) == "Summary of the earlier conversation:\nan old summary\n\n"
    part = b'{"text": "ann asked", "tokens": 2, "at": 5}'
    shared = _head({b"seg:ann": part, b"last_q": b"1"})
    assert shared.segments == (Segment("ann", "ann asked", 2, 5),)
    assert Session(shared).render(ThreadKey.public("castle")) == ("Summary of the earlier conversation:\nann asked\n\n")


def test_a_fold_over_an_old_summary_says_its_counts_are_a_lower_bound() -> None:
    record = fold_more(None, True, "extractive", [(T0, 7)])
    assert record == Folded("extractive", 1, 7, None, T0)
    notice = Session(SessionHead(summary="old and new", folded=record)).head.notice(KEY)
    assert notice is not None and not notice.complete and notice.since is None
    assert "at least 1 earlier exchange (about 7 tokens or more) until " in notice.render()


def test_a_shared_threads_notice_sums_its_askers_parts() -> None:
    ann = Segment("ann", "ann asked", 2, 5, Folded("extractive", 3, 30, T0 + 10, T0 + 20))
    bob = Segment("bob", "bob asked", 2, 6, Folded("extractive", 2, 12, T0, T0 + 15))
    head = SessionHead(segments=(ann, bob))
    notice = head.notice(ThreadKey.public("castle"))
    assert notice is not None
    assert (notice.folded_exchanges, notice.folded_tokens, notice.since, notice.until) == (5, 42, T0, T0 + 20)
    assert notice.search == "/v1/tenants/castle/threads/public/search?q="
    rendered = Session(head).render(ThreadKey.public("castle"))
    assert rendered.count(NOTICE) == 1 and rendered.index(NOTICE) < rendered.index("ann asked")
    # a part set before notices existed makes the counts a lower bound
    old = Segment("cat", "cat asked", 2, 7)
    partial = SessionHead(segments=(ann, old)).notice(ThreadKey.automation("castle", "helper"))
    assert partial is not None and not partial.complete and partial.folded_exchanges == 3
    assert partial.search == "/v1/tenants/castle/threads/automation:helper/search?q="


def test_the_search_route_encodes_names() -> None:
    assert (
        search_route("eu west/1", "session", "ann?x") == "/v1/tenants/eu%20west%2F1/threads/session:ann%3Fx/search?q="
    )
    assert summary_notice("t", "session", "ann", [None, None]) is None
