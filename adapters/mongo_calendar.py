"""The archive's reads by time (MongoDB): local days with entries, and entries of a time range.

Kept apart from adapters/mongo_archives.py, whose MongoConversationArchive takes these methods in.
Every read here is one range on the `by_time` index (tenant, thread, owner, occurred_at) and nothing
else: SecantusDB's planner scans the whole collection when any other condition (a conversation, a
seq or reset_at range) joins that range, a hint makes it slower still (600 ms and more for a dozen
documents), and its `$bucket` took seconds for 5,000 entries. So the documents' times, offsets and
conversations come back projected, and scope, snapshot, conversation and the days' buckets are
decided here, in Python (projections.archives.in_scope, bisect over the days' bounds).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.collection import AsyncCollection

from adapters.mongo_store import mongo_errors
from projections.archives import NEVER, ConversationRef, EntryScope, Scope

BY_TIME = "by_time"
_TIMES = {"_id": 0, "occurred_at": 1, "seq": 1, "reset_at": 1, "conversation": 1}


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
                [("tenant", ASCENDING), ("thread", ASCENDING), ("owner", ASCENDING), ("occurred_at", ASCENDING)],
                name=BY_TIME,
            )

    def _timed(self, tenant: str, thread: str, owner: str, since: int, until: int) -> Any:
        """The one index range every read here is: a thread's entries that occurred in [since, until)."""
        return {"tenant": tenant, "thread": thread, "owner": owner, "occurred_at": {"$gte": since, "$lt": until}}

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
        """Newest first along the index (MongoDB stops at the first entry in scope; SecantusDB sorts the range)."""
        query = self._timed(tenant, thread, owner, since, until)
        with mongo_errors():
            async for doc in self._entries.find(query, _TIMES).sort("occurred_at", DESCENDING).batch_size(100):
                if held(doc, conversation, scope, snapshot):
                    return int(doc["occurred_at"])
        return None

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
        with mongo_errors():
            docs = await self._entries.find(self._timed(tenant, thread, owner, bounds[0], bounds[-1]), _TIMES).to_list()
        for doc in docs:
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
        timed = time_range(since, until)
        query = {"tenant": ref.tenant, "thread": ref.thread, "owner": ref.owner, "occurred_at": timed}
        with mongo_errors():
            docs = await self._entries.find(query, {"terms": 0}).to_list()
        found = [d for d in docs if int(d["seq"]) > after_seq and held(d, ref.conversation, scope, snapshot)]
        return sorted(found, key=lambda d: int(d["seq"]))[:limit]
