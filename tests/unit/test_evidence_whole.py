"""A search's evidence skips the read near an exchange its candidates hold whole (memlog/app/evidence.py
held_whole): only when nothing of the exchange can be elsewhere."""

from __future__ import annotations

from memlog.app.evidence import held_whole
from projections.archives import ConversationRef, Entry

MAIN = ConversationRef("castle", "session", "ann", "main")


def _entry(n: int | None, entry_id: str, role: str, exchange: str = "x0") -> Entry:
    seq = 100 + (n or 0) * 3  # offsets are sparse, places consecutive
    return Entry(MAIN, entry_id, f"threads:0:{seq}", seq, exchange, role, 1, "text", None, "ann", "allay", n=n)


def test_an_exchange_held_from_question_to_answer_with_every_call_answered_is_whole() -> None:
    held = [_entry(0, "x0.q", "question"), _entry(1, "x0.t0.c", "tool"), _entry(2, "x0.t0", "tool")]
    held.append(_entry(3, "x0.a", "answer"))
    assert held_whole(list(reversed(held))) == {(MAIN, "x0"): held}


def test_an_exchange_that_may_have_more_elsewhere_is_read_as_before() -> None:
    question, answer = _entry(0, "x0.q", "question"), _entry(1, "x0.a", "answer")
    assert held_whole([question, answer]) == {(MAIN, "x0"): [question, answer]}
    assert held_whole([question, _entry(2, "x0.a", "answer")]) == {}  # place 1 (another exchange's?) unread
    assert held_whole([question, _entry(1, "x0.t0.c", "tool"), _entry(2, "x0.a", "answer")]) == {}  # a call open
    assert held_whole([question]) == {}  # not answered: its calls may come
    assert held_whole([_entry(1, "x0.t0", "tool"), _entry(2, "x0.a", "answer")]) == {}  # its question elsewhere
    assert held_whole([_entry(None, "x0.q", "question"), _entry(None, "x0.a", "answer")]) == {}  # no places
