"""An archived entry's place in its conversation: `n`, 0, 1, 2, ... in seq order (pure rules).

A search result shows its neighbours, the entries either side of it in its conversation. Offsets (`seq`)
are shared by every thread of a partition, so the entry before seq 900 may be at 350; its place is one
less. A store that keeps places reads a result's neighbours by place, a few documents from an index,
instead of the range of the conversation between the first and last result.

Places are given at insert, from the conversation's count, to the entries past its last seq (a redelivered
entry keeps the place it was given). Erasing one asker of a shared thread, retention and rename leave
holes or no place at all: then `around` answers None and the store reads the range instead, so a hole
never shows the wrong neighbour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import pairwise

from projections.archives import ConversationRef, Entry

# a conversation's (last seq, count of places given); count None: it holds entries archived before there
# were places, so it gives none (a place after unplaced entries would hide them from its neighbours)
Held = Mapping[ConversationRef, tuple[int, int | None]]


def number(entries: Sequence[Entry], held: Held) -> tuple[list[Entry], dict[ConversationRef, int]]:
    """The entries (in log order) with their places, and the count after them of each conversation that
    gives places."""
    last = dict(held)
    placed = []
    for entry in entries:
        last_seq, count = last.get(entry.ref, (-1, 0))
        if entry.seq <= last_seq or count is None:
            placed.append(entry)  # applied before (its document holds its place), or no places here
            continue
        placed.append(replace(entry, n=count))
        last[entry.ref] = (entry.seq, count + 1)
    return placed, {ref: count for ref, (_, count) in last.items() if count is not None}


def wanted(hits: Iterable[Entry], radius: int) -> set[int]:
    """The places either side of each hit, up to the radius (hits have places)."""
    return {
        hit.n + step
        for hit in hits
        if hit.n is not None
        for step in range(-radius, radius + 1)
        if step and hit.n + step >= 0
    }


def around(
    hits: Sequence[Entry], radius: int, snapshot: int, found: Iterable[Entry], count: int | None = None
) -> dict[int, list[Entry]] | None:
    """Each hit's neighbours (by its seq) from the entries found at the places wanted, or None when the
    places cannot be trusted: a hit or an entry without a place, two entries in one place, places out of
    seq order, a place missing. `count`, the places the conversation has given, tells its end from a
    hole; without it a missing place past a hit is taken for a hole too (the range read decides)."""
    if not hits or any(hit.n is None for hit in hits):
        return None
    at: dict[int, Entry] = {}
    for entry in [*hits, *found]:
        if entry.n is None or at.setdefault(entry.n, entry).seq != entry.seq:
            return None
    ordered = [at[n] for n in sorted(at)]
    if any(a.seq >= b.seq for a, b in pairwise(ordered)):
        return None
    result: dict[int, list[Entry]] = {}
    for hit in hits:
        assert hit.n is not None
        before: list[Entry] = []
        for step in range(1, min(radius, hit.n) + 1):
            earlier = at.get(hit.n - step)
            if earlier is None:
                return None
            before.insert(0, earlier)
        after: list[Entry] = []
        for step in range(1, radius + 1):
            later = at.get(hit.n + step)
            if later is None and count is not None and hit.n + step >= count:
                break  # the conversation ends here
            if later is None:
                return None
            if later.seq > snapshot:
                break
            after.append(later)
        result[hit.seq] = [e if e.original is None else replace(e, original=None) for e in [*before, *after]]
    return result
