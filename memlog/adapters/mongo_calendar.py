"""The archive's reads by time (MongoDB): local days with entries, and entries of a time range.

Kept apart from memlog/adapters/mongo_archives.py, whose MongoConversationArchive takes these methods in.
Every read here is one range on the `by_time` index (tenant, thread, owner, at: the times of a group's
entries, a multikey index) and nothing else: SecantusDB's planner scans the whole collection when any
other condition (a conversation, a seq or reset_at range) joins that range, a hint makes it slower
still (600 ms and more for a dozen documents), and its `$bucket` took seconds for 5,000 entries. So
the groups come back (without their texts, originals and tokens), and each entry's time, scope, snapshot and
conversation, and the days' buckets, are decided here, in Python (projections.archives.in_scope,
bisect over the days' bounds). A group matches when any of its times is in the range; its other
entries are dropped here.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.collection import AsyncCollection

from memlog.adapters.mongo_entries import WITHOUT_TERMS, WITHOUT_TEXTS, entries_of
from memlog.adapters.mongo_store import mongo_errors
from projections.archives import NEVER, ConversationRef, EntryScope, Scope

BY_TIME = "by_time"


def time_range(since: int | None, until: int | None) -> dict[str, int] | None:
    """The `occurred_at` condition of [since, until); None when unbounded."""
    found: dict[str, int] = {}
    if since is not None:
        found["$gte"] = since
    if until is not None:
        found["$lt"] = until
    return found or None


def held(doc: dict[str, Any], conversation: str | None, scope: EntryScope, snapshot: int) -> bool:
    """projections.archives.in_scope on a projected document (`reset`: the reset archives alone)."""
    if int(doc["seq"]) > snapshot or conversation not in (None, doc["conversation"]):
        return False
    reset = int(doc.get("reset_at", NEVER)) <= snapshot
    return scope == "history" or reset == (scope == "reset")


class ArchiveCalendarReads:
    """Mixed into MongoConversationArchive: see projections/ports.py ConversationArchive."""

    _entries: AsyncCollection[dict[str, Any]]

    async def prepare_calendar(self) -> None:
        with mongo_errors():
            await self._entries.create_index(
                [("tenant", ASCENDING), ("thread", ASCENDING), ("owner", ASCENDING), ("at", ASCENDING)],
                name=BY_TIME,
            )

    async def _timed(
        self,
        tenant: str,
        thread: str,
        owner: str,
        since: int | None,
        until: int | None,
        fields: dict[str, Any] = WITHOUT_TEXTS,
    ) -> list[dict[str, Any]]:
        """The one index range every read here is: a thread's entries that occurred in [since, until)."""
        timed = time_range(since, until)
        query = {"tenant": tenant, "thread": thread, "owner": owner, **({"at": timed} if timed else {})}
        with mongo_errors():
            groups = await self._entries.find(query, fields).to_list()
        low = -(2**63) if since is None else since
        high = 2**63 if until is None else until
        return [doc for doc in entries_of(groups) if low <= int(doc["occurred_at"]) < high]

    async def newest_time(
        self,
        tenant: str,
        thread: str,
        owner: str,
        *,
        conversation: str | None,
        scope: Scope,
        snapshot: int,
        since: int,
        until: int,
    ) -> int | None:
        """The newest time of an entry in scope in the range."""
        found = [
            int(doc["occurred_at"])
            for doc in await self._timed(tenant, thread, owner, since, until)
            if held(doc, conversation, scope, snapshot)
        ]
        return max(found, default=None)

    async def count_between(
        self,
        tenant: str,
        thread: str,
        owner: str,
        bounds: Sequence[int],
        *,
        conversation: str | None,
        scope: Scope,
        snapshot: int,
    ) -> list[int]:
        """The range's times from the index, bucketed by the days' bounds."""
        if len(bounds) < 2:
            return []
        counts = [0] * (len(bounds) - 1)
        for doc in await self._timed(tenant, thread, owner, bounds[0], bounds[-1]):
            if held(doc, conversation, scope, snapshot):
                counts[bisect.bisect_right(bounds, int(doc["occurred_at"])) - 1] += 1
        return counts

    async def docs_between(
        self,
        ref: ConversationRef,
        scope: EntryScope,
        snapshot: int,
        after_seq: int,
        limit: int,
        since: int | None,
        until: int | None,
    ) -> list[dict[str, Any]]:
        """ConversationArchive.entries with a time range (one local day, say), as documents: the range
        from the index, then the conversation, scope and page here."""
        docs = await self._timed(ref.tenant, ref.thread, ref.owner, since, until, WITHOUT_TERMS)
        found = [d for d in docs if int(d["seq"]) > after_seq and held(d, ref.conversation, scope, snapshot)]
        return sorted(found, key=lambda d: int(d["seq"]))[:limit]
