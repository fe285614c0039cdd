"""The archive's reads by time (MongoDB): local days with entries, and entries of a time range.

Kept apart from adapters/mongo_archives.py, whose MongoConversationArchive takes these methods in.
Every read here is bounded by a time range and hinted to the `by_time` index (tenant, thread, owner,
occurred_at): SecantusDB's planner otherwise scans the collection when a second range (seq, reset_at)
joins the time range. Scope and snapshot are checked on the documents the index range hands over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.collection import AsyncCollection

from adapters.mongo_store import mongo_errors
from projections.archives import Scope

BY_TIME = "by_time"


def time_range(since: int | None, until: int | None) -> dict[str, int] | None:
    """The `occurred_at` condition of [since, until); None when unbounded."""
    found: dict[str, int] = {}
    if since is not None:
        found["$gte"] = since
    if until is not None:
        found["$lt"] = until
    return found or None


def in_scope_query(
    tenant: str, thread: str, owner: str, conversation: str | None, scope: Scope, snapshot: int
) -> dict[str, Any]:
    """projections.archives.in_scope as a filter."""
    query: dict[str, Any] = {"tenant": tenant, "thread": thread, "owner": owner, "seq": {"$lte": snapshot}}
    if conversation is not None:
        query["conversation"] = conversation
    if scope == "current":
        query["reset_at"] = {"$gt": snapshot}
    return query


class ArchiveCalendarReads:
    """Mixed into MongoConversationArchive: see projections/ports.py ConversationArchive."""

    _entries: AsyncCollection[dict[str, Any]]

    async def prepare_calendar(self) -> None:
        with mongo_errors():
            await self._entries.create_index(
                [("tenant", ASCENDING), ("thread", ASCENDING), ("owner", ASCENDING), ("occurred_at", ASCENDING)],
                name=BY_TIME,
            )

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
        query = in_scope_query(tenant, thread, owner, conversation, scope, snapshot)
        query["occurred_at"] = {"$gte": since, "$lt": until}
        with mongo_errors():
            docs = (
                await self._entries.find(query, {"_id": 0, "occurred_at": 1})
                .sort("occurred_at", DESCENDING)
                .limit(1)
                .hint(BY_TIME)
                .to_list()
            )
        return int(docs[0]["occurred_at"]) if docs else None

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
        """One aggregation: the time range from the index, then `$bucket` by the days' bounds."""
        if len(bounds) < 2:
            return []
        query = in_scope_query(tenant, thread, owner, conversation, scope, snapshot)
        query["occurred_at"] = {"$gte": bounds[0], "$lt": bounds[-1]}
        pipeline: list[dict[str, Any]] = [
            {"$match": query},
            {"$bucket": {"groupBy": "$occurred_at", "boundaries": list(bounds), "output": {"n": {"$sum": 1}}}},
        ]
        with mongo_errors():
            docs = await (await self._entries.aggregate(pipeline, hint=BY_TIME)).to_list()
        counted = {int(d["_id"]): int(d["n"]) for d in docs}
        return [counted.get(start, 0) for start in bounds[:-1]]
