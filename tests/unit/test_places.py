"""Places (projections/places.py): neighbours read by place are the neighbours of the whole conversation,
or nothing is claimed (None) and the store reads the range."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from projections.archives import ConversationRef, Entry, neighbours_of
from projections.places import around, number, wanted

REF = ConversationRef("castle", "session", "ann", "main")
OTHER = ConversationRef("castle", "session", "ann", "side")


def entry(seq: int, ref: ConversationRef = REF) -> Entry:
    return Entry(
        ref=ref,
        entry_id=f"e{seq}",
        store_id=f"t:0:{seq}",
        seq=seq,
        exchange_id=None,
        role="question",
        occurred_at=seq,
        text=f"text {seq}",
        original='{"q": 1}',
    )


def test_places_follow_the_count_and_skip_what_was_applied() -> None:
    batch = [entry(5), entry(7, OTHER), entry(9), entry(12)]
    placed, counts = number(batch, {REF: (6, 4)})
    assert [e.n for e in placed] == [None, 0, 4, 5]  # seq 5 is at or before the last seq applied
    assert counts == {REF: 6, OTHER: 1}


def test_a_conversation_archived_before_places_gives_none() -> None:
    placed, counts = number([entry(5), entry(7, OTHER)], {REF: (3, None)})
    assert [e.n for e in placed] == [None, 0]  # REF holds entries without places: a place would hide them
    assert counts == {OTHER: 1}


@given(
    gaps=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=40),
    data=st.data(),
)
def test_by_place_or_not_at_all(gaps: list[int], data: st.DataObject) -> None:
    seqs = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    placed, _ = number([entry(s) for s in seqs], {})
    holes = set(data.draw(st.lists(st.integers(0, len(placed) - 1), max_size=4)))
    kept = [e for i, e in enumerate(placed) if i not in holes]  # an erasure's holes
    if not kept:
        return
    hits = data.draw(st.lists(st.sampled_from(kept), min_size=1, max_size=5, unique_by=lambda e: e.seq))
    radius = data.draw(st.integers(1, 3))
    snapshot = data.draw(st.sampled_from([*seqs, 10_000]))
    hits = [h for h in hits if h.seq <= snapshot] or [kept[0]]
    found = [e for e in kept if e.n in wanted(hits, radius)]
    expected = neighbours_of(
        [replace(e, original=None) for e in kept if e.seq <= snapshot], [h.seq for h in hits], radius
    )
    got = around(hits, radius, snapshot, found)
    if got is not None:
        assert got == expected
    if not holes and all(h.n is not None and h.n + radius < len(placed) for h in hits) and snapshot == 10_000:
        assert got == expected  # nothing missing: the places answer
    counted = around(hits, radius, snapshot, found, count=len(placed))
    if counted is not None:
        assert counted == expected
    if not holes:
        assert counted == expected  # the count tells the conversation's end: no range read needed


def test_a_place_taken_twice_or_out_of_order_is_not_trusted() -> None:
    a, b, c = (replace(entry(s), n=n) for s, n in ((10, 0), (20, 1), (30, 2)))
    assert around([b], 1, 100, [a, c]) == {20: [replace(a, original=None), replace(c, original=None)]}
    assert around([b], 1, 100, [a, replace(c, n=1)]) is None
    assert around([b], 1, 100, [replace(a, n=2), replace(c, n=0)]) is None
    assert around([entry(20)], 1, 100, [a, c]) is None  # a hit without a place
