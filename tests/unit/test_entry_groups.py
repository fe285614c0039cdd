"""The archive's groups (memlog/adapters/mongo_entries.py) are the same however the log is cut into batches:
each batch continues the conversations' tails that the batch before left, and an exchange's entries
land in one group until another exchange, an operation or the size bound ends it."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from memlog.adapters.mongo_entries import (
    ARRAYS,
    GROUP_BYTES,
    GROUP_ENTRIES,
    GROUP_TERMS,
    Tail,
    entry_docs,
    group_doc,
    group_update,
    runs,
    size_of,
)
from projections.archives import ENTRY_TERMS, ConversationRef, Entry, capped_terms, index_terms

CONVERSATIONS = [ConversationRef("castle", "session", owner, "main") for owner in ("ann", "bob")]


def _entry(seq: int, conversation: int, exchange: int, role: str, text: str = "a chest") -> Entry:
    return Entry(
        ref=CONVERSATIONS[conversation],
        entry_id=f"x{exchange}.{role[0]}{seq}",
        store_id=f"threads:0:{seq}",
        seq=seq,
        exchange_id=f"x{exchange}",
        role=role,
        occurred_at=1_000 + seq,
        text=text,
        original=None,
        subject=CONVERSATIONS[conversation].owner,
        terms=index_terms(text),
    )


logs = st.lists(
    st.tuples(st.integers(0, 1), st.integers(0, 3), st.sampled_from(["question", "tool", "answer"])),
    min_size=1,
    max_size=40,
).map(lambda picks: [_entry(seq, c, x, role) for seq, (c, x, role) in enumerate(picks)])


def _membership(batches: list[list[Entry]]) -> dict[str, list[int]]:
    tails: dict[ConversationRef, Tail] = {}
    groups: dict[str, list[int]] = {}
    for batch in batches:
        found, tails = runs(batch, tails)
        for run in found:
            assert run.grows == (run.group in groups)
            groups.setdefault(run.group, []).extend(e.seq for e in run.entries)
    return groups


@settings(max_examples=300, deadline=None)
@given(logs, st.lists(st.integers(1, 40), max_size=10))
def test_groups_do_not_depend_on_the_batches(log: list[Entry], cuts: list[int]) -> None:
    bounds = sorted({0, len(log), *(c for c in cuts if c < len(log))})
    batches = [log[a:b] for a, b in pairwise(bounds)]
    whole = _membership([log])
    assert _membership(batches) == whole
    for group, seqs in whole.items():
        members = [log[s] for s in seqs]
        assert group == members[0].store_id  # named by its first entry
        assert len({(e.ref, e.exchange_id) for e in members}) == 1
    # within a conversation, groups are disjoint ranges of seq
    for ref in CONVERSATIONS:
        spans = sorted((min(s), max(s)) for s in whole.values() if log[s[0]].ref == ref)
        assert all(a[1] < b[0] for a, b in pairwise(spans))


def test_a_group_ends_at_its_size_bound() -> None:
    big = "w " * (GROUP_BYTES // 12)
    entries = [_entry(seq, 0, 0, "tool", big) for seq in range(3)]
    assert size_of(entries[0]) * 2 > GROUP_BYTES >= size_of(entries[0])
    found, _ = runs(entries, {})
    assert [len(run.entries) for run in found] == [1, 1, 1]
    assert [run.group for run in found] == [e.store_id for e in entries]


def test_a_new_group_and_its_update_hold_the_same_entries() -> None:
    entries = [_entry(seq, 0, 0, role) for seq, role in enumerate(["question", "tool", "answer"])]
    inserted = group_doc("g", entries)
    update = group_update(entries)
    assert set(update["$set"]) == {f"{part}.{key}" for part in ("m", "t") for key in inserted["m"]} | set(ARRAYS)
    assert [d["entry_id"] for d in entry_docs(inserted)] == [e.entry_id for e in entries]
    assert {name: inserted[name] for name in ARRAYS} == {name: update["$set"][name] for name in ARRAYS}


def test_a_group_ends_at_its_count_of_entries_and_counts_every_string_it_stores() -> None:
    entries = [_entry(seq, 0, 0, "tool", "") for seq in range(GROUP_ENTRIES + 5)]
    first, tails = runs(entries[:700], {})
    rest, _ = runs(entries[700:], tails)  # the count carries across batches, as the tail
    assert [len(run.entries) for run in first + rest] == [700, GROUP_ENTRIES - 700, 5]
    plain = _entry(0, 0, 0, "tool")
    long_id = replace(plain, exchange_id="\u00e9" * 200, entry_id="\u00e9" * 200 + ".t0")
    # four bytes a character of the exchange id, and of the entry id twice
    assert size_of(long_id) - size_of(plain) == 4 * ((200 - 2) + 2 * (203 - 5))


def test_an_entry_with_many_terms_is_a_group_of_its_own_that_nothing_grows() -> None:
    """Issue 41: every update of a group costs SecantusDB each of its index keys, so an append never
    lands in a group past GROUP_TERMS: a streamed tool call of many words stands alone."""
    many = " ".join(f"w{n}" for n in range(GROUP_TERMS + 1))
    entries = [
        _entry(0, 0, 0, "question", "list the files"),
        _entry(1, 0, 0, "tool", many),
        _entry(2, 0, 0, "answer", "here they are"),
    ]
    whole, _ = runs(entries, {})
    assert [[e.seq for e in run.entries] for run in whole] == [[0], [1], [2]]
    first, tails = runs(entries[:2], {})  # the same, batch by batch, the term count carried by the tail
    rest, _ = runs(entries[2:], tails)
    assert [[e.seq for e in run.entries] for run in first + rest] == [[0], [1], [2]]
    assert not any(run.grows for run in first + rest)
    small = [_entry(seq, 0, 0, role, f"word{seq} shared") for seq, role in enumerate(["question", "tool", "answer"])]
    assert [len(run.entries) for run in runs(small, {})[0]] == [3]


def test_an_append_sets_each_array_to_its_union_with_what_the_group_holds() -> None:
    held = group_doc("g", [_entry(0, 0, 0, "question", "red gate")])
    update = group_update([_entry(1, 0, 0, "tool", "red iron gate"), _entry(2, 0, 0, "answer", "iron door")], held)
    assert update["$set"]["terms"] == ["gate", "red", "iron", "door"]
    assert update["$set"]["ids"] == ["x0.q0", "x0.t1", "x0.a2"]
    assert "$addToSet" not in update and "$push" not in update
    again = group_update([_entry(1, 0, 0, "tool", "red iron gate")], {**held, "terms": update["$set"]["terms"]})
    assert again["$set"]["terms"] == update["$set"]["terms"]  # a redelivery adds nothing


def test_an_entry_past_the_index_cap_keeps_its_first_terms_and_is_marked() -> None:
    words = [f"w{n:06d}" for n in range(ENTRY_TERMS + 250)]
    terms, cut = capped_terms(" ".join(reversed(words)) + " " + words[-1])
    assert (len(terms), cut) == (ENTRY_TERMS, 250)
    assert terms == tuple(sorted(words[250:]))  # the first distinct tokens in text order
    entry = replace(_entry(0, 0, 0, "tool"), terms=terms, terms_cut=cut)
    doc = entry_docs(group_doc("g", [entry]))[0]
    assert doc["terms_cut"] == 250
    assert capped_terms("a few words")[1] == 0
