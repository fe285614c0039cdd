"""The archive's pure rules: matching, ranking, paging, excerpts, cursors, retention planning."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.archives import (
    DAY_MS,
    ConversationMeta,
    ConversationRef,
    Entry,
    RetentionPolicy,
    binding,
    decode_cursor,
    encode_cursor,
    excerpt,
    index_terms,
    match,
    plan_retention,
    rank,
    retention_reason,
)
from schemas.errors import InvalidEvent


def _entry(seq: int, text: str, conversation: str = "main") -> Entry:
    return Entry(
        ref=ConversationRef("t", "session", "ann", conversation),
        entry_id=f"x{seq}.q",
        store_id=f"threads:0:{seq}",
        seq=seq,
        exchange_id=f"x{seq}",
        role="question",
        occurred_at=seq,
        text=text,
        original=None,
        terms=index_terms(text),
    )


def test_exact_phrase_ranks_before_token_coverage() -> None:
    entries = [
        _entry(1, "iron pickaxe and a diamond sword"),
        _entry(2, "my diamond pickaxe broke"),
        _entry(3, "diamond"),
        _entry(4, "Diamond   PICKAXE, again"),
    ]
    hits = rank("diamond pickaxe", entries, after=None, limit=10)
    assert [(h.entry.seq, h.found.phrase) for h in hits] == [(4, True), (2, True), (1, False)]


def test_a_multi_term_query_needs_two_matching_tokens_and_a_single_term_one() -> None:
    assert match("diamond pickaxe", "only diamond here") is None
    assert match("diamond", "only diamond here") is not None
    assert match("red iron gate", "a red gate") == match("red iron gate", "a red gate")
    found = match("red iron gate", "a red gate")
    assert found is not None and (found.phrase, found.coverage) == (False, 2)


def test_tokens_are_ascii_runs_and_other_scripts_match_by_phrase_only() -> None:
    assert index_terms("Café au-lait 42") == ("42", "au", "caf", "lait")
    assert match("日本", "東京と日本") is not None
    assert match("日本", "東京") is None


def test_excerpts_are_at_most_240_characters_and_hold_the_match() -> None:
    text = "word " * 400 + "the needle is here " + "tail " * 400
    found = match("needle", text)
    assert found is not None
    cut = excerpt(text, found.at)
    assert len(cut) <= 240 and "needle" in cut


texts = st.lists(st.text(alphabet="ab xyz", min_size=0, max_size=20), min_size=0, max_size=30)


@given(texts, st.integers(1, 7), st.sampled_from(["a", "ab", "a b", "x yz", "z"]))
def test_paging_returns_every_match_once_in_rank_order(bodies: list[str], page: int, query: str) -> None:
    entries = [_entry(i, text) for i, text in enumerate(bodies)]
    whole = [h.entry.seq for h in rank(query, entries, after=None, limit=10_000)]
    paged: list[int] = []
    after = None
    while True:
        hits = rank(query, entries, after=after, limit=page)
        paged += [h.entry.seq for h in hits]
        if len(hits) < page:
            break
        after = hits[-1].key
    assert paged == whole


def test_one_identity_seen_twice_counts_once() -> None:
    twice = [_entry(1, "red chest"), _entry(1, "red chest")]
    assert len(rank("red chest", twice, after=None, limit=10)) == 1


def test_cursors_bind_scope_thread_and_query() -> None:
    bound = binding("search", "t", "session", "ann", "current", None, "red chest", None, None)
    cursor = encode_cursor(bound, 41, [0, -2, -5, "threads:0:5"])
    assert decode_cursor(cursor, bound) == (41, [0, -2, -5, "threads:0:5"])
    for other in (
        binding("search", "t", "session", "ann", "history", None, "red chest", None, None),
        binding("search", "t", "session", "bob", "current", None, "red chest", None, None),
        binding("search", "t", "session", "ann", "current", None, "iron", None, None),
    ):
        with pytest.raises(InvalidEvent) as refused:
            decode_cursor(cursor, other)
        assert refused.value.field == "cursor"
    with pytest.raises(InvalidEvent):
        decode_cursor("not-a-cursor", bound)


def _meta(conversation: str, kind: str, last_at: int, **flags: object) -> ConversationMeta:
    return ConversationMeta(
        ref=ConversationRef("t", "session", "ann", conversation), kind=kind, last_at=last_at, **flags
    )  # type: ignore[arg-type]


def test_retention_is_disabled_until_enabled_and_keeps_current_running_and_protected() -> None:
    now = 100 * DAY_MS
    metas = [
        _meta("main", "main", 0),
        _meta("old-task", "task", now - 31 * DAY_MS),
        _meta("young-task", "task", now - 29 * DAY_MS),
        _meta("old-sub", "subagent", now - 8 * DAY_MS),
        _meta("running", "subagent", 0, open_exchange="x1"),
        _meta("kept", "subagent", 0, protected=True),
        _meta("old-main-kind", "main", now - 61 * DAY_MS),
    ]
    assert plan_retention(metas, RetentionPolicy(), now) == []
    assert retention_reason(metas[1], RetentionPolicy(), now) == "retention is disabled"
    planned = plan_retention(metas, RetentionPolicy(enabled=True), now)
    assert [t.meta.ref.conversation for t in planned] == ["old-main-kind", "old-task", "old-sub"]
    assert retention_reason(metas[0], RetentionPolicy(enabled=True), now) == "the current conversation is protected"
