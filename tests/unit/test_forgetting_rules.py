"""A forgotten fact's remember call loses its text in the session, not in the archive."""

from __future__ import annotations

import json

from projections.archives import archived_form
from projections.forgetting import FORGOTTEN_MARK, forgotten_calls, is_forgotten_call
from projections.session import Exchange, Session, SessionHead, ToolCall
from schemas.events import SESSION_THREAD, Envelope, ToolCalled


def _call(index: int, text: str, fact_id: str, name: str = "remember") -> ToolCall:
    return ToolCall(index, name, json.dumps({"text": text}), json.dumps({"saved": True, "fact_id": fact_id}), True)


def _session() -> Session:
    calls = (_call(0, "likes tea", "f1"), _call(1, "hates rain", "f2"), _call(2, "x", "f1", name="recall"))
    return Session(SessionHead(), (Exchange("x1", "q", tool_calls=calls),))


def test_only_the_remember_calls_that_saved_the_forgotten_fact_are_marked() -> None:
    found = forgotten_calls(_session(), {"f1"})
    assert [(c.exchange_id, c.call_index) for c in found] == [("x1", 0)]
    assert json.loads(found[0].arguments) == {"text": FORGOTTEN_MARK, "forgotten": True}
    assert "likes tea" not in found[0].arguments + found[0].result


def test_clearing_marks_every_remember_call_once() -> None:
    assert [c.call_index for c in forgotten_calls(_session(), None)] == [0, 1]
    marked = ToolCall(0, "remember", json.dumps({"text": FORGOTTEN_MARK, "forgotten": True}), '{"fact_id": "f1"}', True)
    assert forgotten_calls(Session(SessionHead(), (Exchange("x1", "q", tool_calls=(marked,)),)), None) == []
    assert forgotten_calls(None, None) == []


def test_the_archive_keeps_the_original_not_the_marked_copy() -> None:
    env = Envelope(tenant="t", subject="ann", agent="a", thread=SESSION_THREAD, producer="p")
    marked = ToolCalled(env, "x1", 0, "remember", json.dumps({"text": FORGOTTEN_MARK, "forgotten": True}), "{}")
    assert is_forgotten_call(marked.name, marked.arguments)
    assert archived_form(marked) is None
    plain = ToolCalled(env, "x1", 0, "remember", json.dumps({"text": "forgotten"}), "{}")
    assert archived_form(plain) == plain
