"""The archive's pure rules: matching, ranking, paging, excerpts, cursors, retention planning."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.archives import (
    DAY_MS,
    ArchiveGeneration,
    ConversationMeta,
    ConversationRef,
    Entry,
    InsertEntries,
    RetentionPolicy,
    archived_form,
    binding,
    decode_cursor,
    encode_cursor,
    excerpt,
    index_terms,
    match,
    plan_archive,
    plan_retention,
    retention_reason,
)
from projections.cursors import Cursors
from projections.position import Position
from projections.ranking import rank
from projections.relevance import bag, query_of, terms
from schemas.errors import InvalidEvent
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent, ThreadFolded, ToolCalled

CURSORS = Cursors(b"k" * 32)


def _entry(
    seq: int, text: str, conversation: str = "main", exchange: str | None = None, role: str = "question"
) -> Entry:
    return Entry(
        ref=ConversationRef("t", "session", "ann", conversation),
        entry_id=f"{exchange or f'x{seq}'}.{role[0]}",
        store_id=f"threads:0:{seq}",
        seq=seq,
        exchange_id=exchange or f"x{seq}",
        role=role,
        occurred_at=seq,
        text=text,
        original=None,
        terms=index_terms(text),
    )


def test_exact_phrase_ranks_before_bm25() -> None:
    entries = [
        _entry(1, "iron pickaxe and a diamond sword"),
        _entry(2, "my diamond pickaxe broke"),
        _entry(3, "diamond"),
        _entry(4, "Diamond   PICKAXE, again"),
    ]
    hits = rank("diamond pickaxe", entries, after=None, limit=10)
    assert [(h.entry.seq, h.found.phrase) for h in hits] == [(4, True), (2, True), (1, False), (3, False)]


def test_rare_words_outweigh_common_ones_and_stop_words_find_nothing() -> None:
    entries = [_entry(i, f"we went to the castle on day {i}") for i in range(1, 9)]
    entries.append(_entry(9, "the builder suggested a moat of lava around the castle"))
    entries.append(_entry(10, "the lava moat needs obsidian"))
    hits = rank("what did the builder suggest for the moat?", entries, after=None, limit=10)
    assert [h.entry.seq for h in hits] == [9, 10]  # the castle days share only stop words
    assert rank("what did they say about it?", entries, after=None, limit=10) == []


def test_stop_words_weigh_among_the_candidates_content_words_found() -> None:
    entries = [
        _entry(1, "la cloche sonne quand il pleut"),
        _entry(2, "la cloche sonne et il pleut"),  # the same content words, newer: it would win a tie
        _entry(3, "quand les pillards dorment, tout est calme"),  # stop words in common, no content word
    ]
    hits = rank("quand la cloche sonne-t-elle ?", entries, after=None, limit=10)
    assert [h.entry.seq for h in hits] == [1, 2]  # "quand" tells 1 from 2; 3 is no candidate
    assert query_of("quand la cloche").stops == ("quand", "la")
    assert rank("quand les brigands", entries, after=None, limit=10) == []  # "brigands" is nowhere


def test_a_query_of_stop_words_alone_still_matches_them() -> None:
    hits = rank("to be or not", [_entry(1, "not to be"), _entry(2, "a castle")], after=None, limit=10)
    assert [h.entry.seq for h in hits] == [1]


def test_ties_fall_to_relevance_before_recency() -> None:
    short, long = _entry(1, "spare diamonds"), _entry(2, "spare diamonds " + "and many other words " * 20)
    assert [h.entry.seq for h in rank("spare diamonds", [long, short], after=None, limit=10)] == [1, 2]


def test_one_result_per_exchange_with_its_other_matching_entries_named() -> None:
    entries = [
        _entry(1, "where are the spare diamonds?", exchange="x1"),
        _entry(2, "I hid the spare diamonds under the oak", exchange="x1", role="answer"),
        _entry(3, "oak planks are cheap", exchange="x3"),
    ]
    hits = rank("spare diamonds oak", entries, after=None, limit=10)
    assert [(h.entry.entry_id, [e.entry_id for e in h.also]) for h in hits] == [("x1.a", ["x1.q"]), ("x3.q", [])]
    by_entry = rank("spare diamonds oak", entries, after=None, limit=10, group="entry")
    assert sorted(h.entry.entry_id for h in by_entry) == ["x1.a", "x1.q", "x3.q"]


def test_words_of_every_script_are_found() -> None:
    assert index_terms("Café au-lait 42") == ("42", "au", "cafe", "lait")
    assert match("cafe", "Un café, s'il vous plaît") is not None
    assert match("ёлки", "Мы купили ёлку и елки") is not None
    assert match("日本", "東京と日本") is not None
    assert match("日本", "東京") is None
    entries = [_entry(1, "我们在东京见面"), _entry(2, "他在日本工作"), _entry(3, "日历")]
    assert rank("日本", entries, after=None, limit=10)[0].entry.seq == 2
    russian = [_entry(1, "Я спрятал запасные алмазы под дубом"), _entry(2, "Сегодня идёт дождь")]
    assert [h.entry.seq for h in rank("где мои алмазы?", russian, after=None, limit=10)] == [1]


def test_a_query_of_more_than_50_terms_is_refused_naming_q() -> None:
    with pytest.raises(InvalidEvent, match="q"):
        query_of(" ".join(f"w{n}" for n in range(1_000)))
    assert len(query_of(" ".join(f"w{n}" for n in range(50)) + " the a of").terms) == 50


def test_the_index_keeps_every_distinct_token_of_a_long_entry() -> None:
    words = [f"w{n:05d}" for n in range(4_999)] + ["zzz"]
    terms = index_terms(" ".join(reversed(words)) + " zzz")
    assert len(terms) == 5_000 and terms[-1] == "zzz" and terms == tuple(sorted(words))


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
    cursor = encode_cursor(CURSORS, bound, 41, [0, -2, -5, "threads:0:5"])
    assert decode_cursor(CURSORS, cursor, bound, 4) == (41, [0, -2, -5, "threads:0:5"])
    for other in (
        binding("search", "t", "session", "ann", "history", None, "red chest", None, None),
        binding("search", "t", "session", "bob", "current", None, "red chest", None, None),
        binding("search", "t", "session", "ann", "current", None, "iron", None, None),
    ):
        with pytest.raises(InvalidEvent) as refused:
            decode_cursor(CURSORS, cursor, other, 4)
        assert refused.value.field == "cursor"
    with pytest.raises(InvalidEvent):
        decode_cursor(CURSORS, "not-a-cursor", bound, 4)


def _meta(conversation: str, kind: str, last_at: int, **flags: object) -> ConversationMeta:
    return ConversationMeta(
        ref=ConversationRef("t", "session", "ann", conversation), kind=kind, last_at=last_at, **flags
    )  # type: ignore[arg-type]


def test_retention_is_disabled_until_enabled_and_keeps_current_running_and_protected() -> None:
    now = 100 * DAY_MS
    metas = [
        _meta("main", "main", 0),
        _meta("old-task", "task", now - 31 * DAY_MS, archived=True),
        _meta("young-task", "task", now - 29 * DAY_MS, archived=True),
        _meta("old-sub", "subagent", now - 8 * DAY_MS, archived=True),
        _meta("unfinished-task", "task", now - 31 * DAY_MS),
        _meta("running", "subagent", 0, open_exchange="x1"),
        _meta("kept", "subagent", 0, protected=True),
        _meta("old-main-kind", "main", now - 61 * DAY_MS),
    ]
    assert plan_retention(metas, RetentionPolicy(), now) == []
    assert retention_reason(metas[1], RetentionPolicy(), now) == "retention is disabled"
    planned = plan_retention(metas, RetentionPolicy(enabled=True), now)
    assert [t.meta.ref.conversation for t in planned] == ["old-main-kind", "old-task", "old-sub"]
    assert "never purged by retention" in (retention_reason(metas[0], RetentionPolicy(enabled=True), now) or "")
    assert "not finished" in (retention_reason(metas[4], RetentionPolicy(enabled=True), now) or "")


def _public(subject: str = "ann") -> Envelope:
    return Envelope(tenant="t", subject=subject, thread="public", producer="p", occurred_at=5)


def test_a_public_tool_call_is_never_archived_and_a_public_original_never_carries_tool_results() -> None:
    """Seed 000: the public thread keeps the answers, not the tool results, which only the asker may see."""
    whole = '{"question":"q","tool_calls":[{"name":"chest","result":{"diamond":12}}]}'
    events: list[tuple[ThreadEvent, Position]] = [
        (QuestionAsked(_public(), "x1", "what is in it?", original=whole), Position("threads", 0, 1)),
        (ToolCalled(_public(), "x1", 0, "chest", "{}", '{"diamond":12}'), Position("threads", 0, 2)),
        (AnswerGiven(_public(), "x1", "plenty"), Position("threads", 0, 3)),
        (QuestionAsked(_public(), "x2", "and now?", original='{"question":"and now?"}'), Position("threads", 0, 4)),
    ]
    (insert,) = plan_archive(events)
    assert isinstance(insert, InsertEntries)
    assert [(e.entry_id, e.original) for e in insert.entries] == [
        ("x1.q", None),
        ("x1.a", None),
        ("x2.q", '{"question":"and now?"}'),
    ]
    assert archived_form(events[1][0]) is None and "diamond" not in repr(insert)
    in_session = replace(events[1][0], envelope=replace(_public(), thread="session"))
    assert archived_form(in_session) == in_session  # the asker's own session keeps them


def test_each_askers_part_of_a_shared_fold_is_their_own_entry_in_one_generation() -> None:
    def part(asker: str, text: str, covers: tuple[str, ...], offset: int) -> tuple[ThreadEvent, Position]:
        return ThreadFolded(_public(asker), "f1", text, covers, "extractive", segment=True), Position(
            "threads", 0, offset
        )

    events = [part("ann", "ann's part", ("x1",), 7), part("bob", "bob's part", ("x2",), 8), part("cat", "", (), 9)]
    ops = plan_archive(events)
    generations = [op for op in ops if isinstance(op, ArchiveGeneration)]
    assert {op.archive_id for op in generations} == {"compact:f1"} and len(generations) == 2
    entries = [entry for op in ops if isinstance(op, InsertEntries) for entry in op.entries]
    assert [(e.entry_id, e.subject, e.text) for e in entries] == [
        ("fold.f1.7", "ann", "ann's part"),
        ("fold.f1.8", "bob", "bob's part"),
    ]  # cat's part was dropped: nothing to keep, and erasing ann takes hers with her


@pytest.mark.parametrize(
    "text",
    ["The A.I. team's PRs, again and AGAIN", "Мы купили ёлку и ёлки", "我们在东京见面 日本", "café CAFÉ cafe", ""],
)
def test_a_bag_counts_the_terms_a_text_has(text: str) -> None:
    counted = bag(text)
    assert counted.counts == Counter(terms(text)) and counted.length == len(terms(text))
