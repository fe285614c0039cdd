"""The archive's postings in MongoDB (issue 41, bounded search; the rules are in projections/postings.py).

`postings`: one small document per (group, term) of an archived entry: `_id` `<group>|<term>`, so a
redelivered or replayed entry writes nothing new; the conversation's fields, `subject`, `agent`, the
entry's `seq`, `term` and its impact `i`. Three indexes: `by_agent_term` (tenant, agent, term, i) reads a
term's postings of one agent, `by_term_thread` (tenant, term, thread, owner, i) those of one thread, and
`by_conversation` (tenant, thread, owner, conversation, seq) serves the thread operations that delete or
move a conversation's entries, and erasure. Postings hold words of a
subject's text: erasure, retention purge, thread deletion and renames reach them with the groups.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from memlog.adapters.mongo_entries import where
from projections.archives import ConversationRef, Entry
from projections.postings import Within, impacts

POSTINGS = "postings"
BY_TERM_THREAD = "by_term_thread"


class MongoPostings:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._postings = database[POSTINGS]

    async def prepare(self) -> None:
        await self._postings.create_index(
            [("tenant", ASCENDING), ("agent", ASCENDING), ("term", ASCENDING), ("i", DESCENDING)],
            name="by_agent_term",
        )
        await self._postings.create_index(
            [
                ("tenant", ASCENDING),
                ("term", ASCENDING),
                ("thread", ASCENDING),
                ("owner", ASCENDING),
                ("i", DESCENDING),
            ],
            name=BY_TERM_THREAD,
        )
        await self._postings.create_index(
            [
                ("tenant", ASCENDING),
                ("thread", ASCENDING),
                ("owner", ASCENDING),
                ("conversation", ASCENDING),
                ("seq", ASCENDING),
            ],
            name="by_conversation",
        )

    async def post(self, grouped: Iterable[tuple[str, Iterable[Entry]]]) -> None:
        """The postings of entries written into their groups (group id, entries); those held already stay."""
        docs = [
            {
                "_id": f"{group}|{term}",
                **where(entry.ref),
                "subject": entry.subject,
                "agent": entry.agent,
                "g": group,
                "seq": entry.seq,
                "term": term,
                "i": impact,
            }
            for group, entries in grouped
            for entry in entries
            for term, impact in impacts(entry.text).items()
        ]
        unique = list({doc["_id"]: doc for doc in reversed(docs)}.values())  # a group's first entry posts a term
        if unique:
            try:
                await self._postings.insert_many(unique, ordered=False)
            except BulkWriteError as exc:
                if any(err.get("code") != 11000 for err in exc.details.get("writeErrors", [])):
                    raise  # a posting held already (a redelivery, a term of the group's earlier entry) stays

    async def top(self, tenant: str, agent: str | None, term: str, count: int, time_ms: int) -> list[str]:
        """The groups of the `count` postings of highest impact of the agent's term, or the tenant's when
        None (on `by_term_thread`'s prefix); count + 1 tells more."""
        query = {"tenant": tenant, "term": term} | ({} if agent is None else {"agent": agent})
        found = self._postings.find(query, {"g": 1, "_id": 0})
        docs = await found.sort("i", DESCENDING).limit(count).max_time_ms(time_ms).to_list()
        return [str(doc["g"]) for doc in docs]

    async def top_in_thread(
        self, tenant: str, thread: str, owner: str, term: str, count: int, time_ms: int, *, within: Within
    ) -> list[str]:
        """As `top`, for one thread's term: of one conversation when named, of entries up to a snapshot.
        Equality alone goes to MongoDB: with the conversation or a range on `seq` named, SecantusDB's
        planner scans the collection, and a hint makes its index scan 50 times slower (measured); so the
        term's postings in the thread are all read (small documents) and sorted here."""
        conversation, snapshot = within
        query = {"tenant": tenant, "term": term, "thread": thread, "owner": owner}
        fields = {"g": 1, "conversation": 1, "seq": 1, "i": 1, "_id": 0}
        docs = await self._postings.find(query, fields).max_time_ms(time_ms).to_list()
        kept = [d for d in docs if conversation in (None, d.get("conversation")) and d.get("seq", 0) <= snapshot]
        kept.sort(key=lambda d: (-int(d.get("i", 0)), str(d["g"])))
        return [str(doc["g"]) for doc in kept[:count]]

    async def drop_below(self, ref: ConversationRef, before: int) -> None:
        """A purge: the conversation's postings of entries before `before` (no group spans a thread operation)."""
        await self._postings.delete_many({**where(ref), "seq": {"$lt": before}})

    async def drop_groups(self, ref: ConversationRef, groups: list[str]) -> None:
        """A generations purge: the conversation's postings of these groups."""
        await self._postings.delete_many({**where(ref), "g": {"$in": groups}})

    async def move_below(self, ref: ConversationRef, before: int, target: str) -> None:
        """A rename: the conversation's postings of entries before `before` go with their groups."""
        await self._postings.update_many({**where(ref), "seq": {"$lt": before}}, {"$set": {"conversation": target}})

    async def erase(self, subject: str, refs: Iterable[ConversationRef]) -> int:
        """The subject's postings, read by the conversations their groups were in."""
        erased = 0
        for ref in set(refs):
            erased += (await self._postings.delete_many({**where(ref), "subject": subject})).deleted_count
        return erased
