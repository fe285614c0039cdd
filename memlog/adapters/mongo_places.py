"""The archive's neighbour reads (MongoDB): by place when the places hold, else one range read.

Kept apart from memlog/adapters/mongo_archives.py, whose MongoConversationArchive takes these methods in. The
places (`n`, projections/places.py) sit on the `by_place` index (tenant, thread, owner, conversation, n,
the places of a group's entries): the groups holding the places wanted that the caller does not already
hold come back in one `$in` read, usually one or two groups. When places cannot be trusted the
neighbours come from one range of the conversation on `by_conversation`, bounded by the entries the
caller holds, plus a read of `radius` entries past either end only when the caller holds too few there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.collection import AsyncCollection

from memlog.adapters.mongo_entries import (
    WITHOUT_ORIGINALS,
    WITHOUT_TEXTS,
    conversation_id,
    entries_of,
    entry_of_doc,
    where,
)
from memlog.adapters.mongo_scans import every, in_seq_order
from memlog.adapters.mongo_store import mongo_errors
from projections.archives import ConversationRef, Entry, neighbours_of
from projections.places import around, wanted

BY_PLACE = "by_place"
NEIGHBOUR_FIELDS = WITHOUT_ORIGINALS  # a neighbour is shown, never its request
PLACES = 32  # places a command reads at most: about 16 groups of two entries


class ArchiveNeighbourReads:
    """Mixed into MongoConversationArchive: see projections/ports.py ConversationArchive.neighbours."""

    _entries: AsyncCollection[dict[str, Any]]
    _conversations: AsyncCollection[dict[str, Any]]

    async def prepare_places(self) -> None:
        with mongo_errors():
            await self._entries.create_index(
                [
                    ("tenant", ASCENDING),
                    ("thread", ASCENDING),
                    ("owner", ASCENDING),
                    ("conversation", ASCENDING),
                    ("n", ASCENDING),
                ],
                name=BY_PLACE,
            )

    async def neighbours(
        self,
        ref: ConversationRef,
        seqs: list[int],
        radius: int,
        snapshot: int,
        known: Sequence[Entry] = (),
        texts: bool = True,
    ) -> dict[int, list[Entry]]:
        mine = [e for e in known if e.ref == ref]
        asked = set(seqs)
        hits = [e for e in mine if e.seq in asked]
        fields = NEIGHBOUR_FIELDS if texts else WITHOUT_TEXTS
        placed = None
        if len({h.seq for h in hits}) == len(asked):
            placed = await self._by_place(ref, hits, radius, snapshot, mine, fields)
        if placed is None:
            placed = await self._by_range(ref, seqs, radius, snapshot, mine, fields)
        return placed

    async def _by_place(
        self,
        ref: ConversationRef,
        hits: list[Entry],
        radius: int,
        snapshot: int,
        mine: list[Entry],
        fields: dict[str, int],
    ) -> dict[int, list[Entry]] | None:
        if any(h.n is None for h in hits):
            return None
        places = wanted(hits, radius)
        held = [e for e in mine if e.n in places]
        missing = sorted(places - {e.n for e in held})
        groups: list[dict[str, Any]] = []
        with mongo_errors():  # a slice of places a command: each reply is a few groups to decode
            for start in range(0, len(missing), PLACES):
                query = {**where(ref), "n": {"$in": missing[start : start + PLACES]}}
                groups += await self._entries.find(query, fields).to_list()
        found = [doc for doc in entries_of(groups) if doc.get("n") in places - {e.n for e in held}]
        entries = [*held, *(entry_of_doc(d) for d in found)]
        placed = around(hits, radius, snapshot, entries)
        if placed is None:  # perhaps only the conversation's end: its count of places tells
            with mongo_errors():
                meta = await self._conversations.find_one({"_id": conversation_id(ref)}, {"n": 1})
            if meta is not None and meta.get("n") is not None:
                placed = around(hits, radius, snapshot, entries, count=int(meta["n"]))
        return placed

    async def _by_range(
        self,
        ref: ConversationRef,
        seqs: list[int],
        radius: int,
        snapshot: int,
        mine: list[Entry],
        fields: dict[str, int],
    ) -> dict[int, list[Entry]]:
        low, high = min(seqs), max(seqs)
        held = sorted({e.seq for e in mine if e.seq <= snapshot})
        below = [s for s in held if s < low]
        above = [s for s in held if s > high]
        start = below[-radius] if len(below) >= radius else low
        stop = above[radius - 1] if len(above) >= radius else high
        at = where(ref)
        before: list[dict[str, Any]] = []
        after: list[dict[str, Any]] = []
        with mongo_errors():
            span = await in_seq_order(self._entries, at, {"$gte": start, "$lte": stop}, every, None, fields=fields)
            if start == low:
                before = await in_seq_order(
                    self._entries, at, {"$lt": low}, every, radius, descending=True, fields=fields
                )
            if stop == high:
                after = await in_seq_order(
                    self._entries, at, {"$gt": high, "$lte": snapshot}, every, radius, fields=fields
                )
        ordered = sorted((entry_of_doc(d) for d in [*before, *span, *after]), key=lambda e: e.seq)
        return neighbours_of(ordered, seqs, radius)
