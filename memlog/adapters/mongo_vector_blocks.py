"""Archive search's vectors in MongoDB (MEMLOG_SEARCH_VECTORS, issue 35), kept apart from the groups.

`vector_blocks`: a conversation's runs' vectors (memlog/adapters/archive_vectors.py: 384 int8 bytes
each), packed by block: one document per (conversation, asker, agent, block of BLOCK places), `v`
mapping `s<seq>` of a run's first entry to its vector and `g` the same key to the run's group. A
search reads its scope's vectors from here: a thread's 300 exchanges are about ten small documents,
where the groups' `v` cost a whole group document each (SecantusDB reads a document whole, whatever
the projection: 62 ms for a thread's 180 groups, 283 ms for an agent's 720, measured).

The blocks follow their groups: written after them (an update per block, idempotent: a redelivered run
sets the same key again), pruned by a purge (the keys below its position, or of the groups a
generations purge takes), moved by a rename (a run keeps its key and block, in the target's document),
and erased with the subject (`{tenant, subject}`: every block is one asker's). A fork's copies are
groups like any others and get blocks of their own. Groups written before these blocks kept their
vectors in their own `v`: `prepare` moves them here once (`backfill`, when search has vectors; a
group erased or purged meanwhile takes its `v` with it).

Indexes: `by_thread` (tenant, thread, owner, conversation) serves a thread's search and the thread
operations; `by_agent` (tenant, agent) an agent's search; `by_subject` (tenant, subject) erasure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pymongo import ASCENDING, DeleteOne, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from memlog.adapters.mongo_entries import GROUPS, conversation_id, where
from projections.archives import ConversationRef, Entry

log = logging.getLogger(__name__)

VECTOR_BLOCKS = "vector_blocks"
BLOCK = 64  # places a block covers: an exchange takes two or more, so about 30 vectors (12 KB) a block
UNPLACED = 4096  # an entry archived before places: its block by its offset instead (a coarser, sparser key)
BACKFILLED = "backfilled"  # the marker of the groups' vectors moved here (no tenant: no scope reads it)
BACKFILL_CHUNK = 500
READ_BATCH = 16  # blocks a read asks for at a time, so that one over `most` vectors stops early

Found = list[tuple[str, bytes]]  # (group, vector)


@dataclass(frozen=True)
class Item:
    """A run's vector and where it goes."""

    ref: ConversationRef
    subject: str | None
    agent: str | None
    block: str
    seq: int  # the run's first entry's
    group: str
    vector: bytes


def block_of(n: int | None, seq: int) -> str:
    """The block of a run, by its first entry: its place's, else its offset's (an entry before places)."""
    return f"n{n // BLOCK}" if n is not None else f"o{seq // UNPLACED}"


def block_id(ref: ConversationRef, subject: str | None, agent: str | None, block: str) -> str:
    return json.dumps([conversation_id(ref), subject, agent, block])


def _key(seq: int) -> str:
    return f"s{seq}"


def _seq(key: str) -> int:
    return int(key[1:])


class MongoVectorBlocks:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._blocks: AsyncCollection[dict[str, Any]] = database[VECTOR_BLOCKS]
        self._groups: AsyncCollection[dict[str, Any]] = database[GROUPS]

    async def prepare(self, backfill: bool) -> None:
        """The indexes; with `backfill` (search has vectors) the groups' own vectors moved here once."""
        where_fields = [("tenant", ASCENDING), ("thread", ASCENDING), ("owner", ASCENDING)]
        await self._blocks.create_index([*where_fields, ("conversation", ASCENDING)], name="by_thread")
        await self._blocks.create_index([("tenant", ASCENDING), ("agent", ASCENDING)], name="by_agent")
        await self._blocks.create_index([("tenant", ASCENDING), ("subject", ASCENDING)], name="by_subject")
        if backfill:
            await self.backfill()

    async def put(self, runs: Iterable[tuple[Entry, str, bytes]]) -> None:
        """Runs' vectors: (the run's first entry, its group, its vector); one update per block."""
        await self._write(
            Item(first.ref, first.subject, first.agent, block_of(first.n, first.seq), first.seq, group, vector)
            for first, group, vector in runs
        )

    async def _write(self, items: Iterable[Item]) -> None:
        per_block: dict[str, tuple[Item, dict[str, Any]]] = {}
        for item in items:
            name = block_id(item.ref, item.subject, item.agent, item.block)
            _, assigned = per_block.setdefault(name, (item, {}))
            assigned |= {f"v.{_key(item.seq)}": item.vector, f"g.{_key(item.seq)}": item.group}
        if not per_block:
            return
        await self._blocks.bulk_write(
            [
                UpdateOne(
                    {"_id": name, **_thread(item.ref)},
                    {
                        "$set": assigned,
                        "$setOnInsert": {
                            "conversation": item.ref.conversation,
                            "subject": item.subject,
                            "agent": item.agent,
                            "b": item.block,
                        },
                    },
                    upsert=True,
                )
                for name, (item, assigned) in per_block.items()
            ],
            ordered=False,
        )

    async def read(self, scope: dict[str, Any], most: int, time_ms: int) -> Found:
        """The scope's vectors with their groups, at most `most` (the first blocks the server returns:
        unsorted, as a sort would read them all)."""
        found: Found = []
        cursor = self._blocks.find(scope, {"v": 1, "g": 1}).batch_size(READ_BATCH).max_time_ms(time_ms)
        try:
            async for doc in cursor:
                groups = doc.get("g") or {}
                found += [(str(groups[key]), blob) for key, blob in (doc.get("v") or {}).items() if key in groups]
                if len(found) >= most:
                    break
        finally:
            await cursor.close()
        return found[:most]

    async def drop_below(self, ref: ConversationRef, before: int) -> None:
        """A purge: the conversation's runs before `before` (no group spans a thread operation)."""
        await self._prune(ref, lambda seq, _: seq < before)

    async def drop_groups(self, ref: ConversationRef, groups: list[str]) -> None:
        """A generations purge: the conversation's runs of these groups."""
        gone = set(groups)
        await self._prune(ref, lambda _, group: group in gone)

    async def _prune(self, ref: ConversationRef, gone: Callable[[int, str], bool]) -> None:
        writes: list[DeleteOne | UpdateOne] = []
        for doc in await self._blocks.find(where(ref), {"g": 1}).to_list():
            held = doc.get("g") or {}
            out = [key for key, group in held.items() if gone(_seq(key), str(group))]
            writes += _taken(doc["_id"], ref, out, len(held))
        if writes:
            await self._blocks.bulk_write(writes, ordered=False)

    async def move_below(self, ref: ConversationRef, before: int, target: str) -> None:
        """A rename: the conversation's runs before `before` go to the target's blocks (written there
        first, then taken from the source's: a rename redelivered part way moves the rest)."""
        moved = ConversationRef(ref.tenant, ref.thread, ref.owner, target)
        items: list[Item] = []
        sources: list[DeleteOne | UpdateOne] = []
        for doc in await self._blocks.find(where(ref)).to_list():
            held, vectors = doc.get("g") or {}, doc.get("v") or {}
            out = [key for key in held if _seq(key) < before]
            items += [
                Item(
                    moved,
                    doc.get("subject"),
                    doc.get("agent"),
                    str(doc.get("b")),
                    _seq(key),
                    str(held[key]),
                    vectors[key],
                )
                for key in out
                if key in vectors
            ]
            sources += _taken(doc["_id"], ref, out, len(held))
        await self._write(items)
        if sources:
            await self._blocks.bulk_write(sources, ordered=False)

    async def erase(self, tenant: str, subject: str) -> int:
        """The subject's vectors (every block is one asker's)."""
        return int((await self._blocks.delete_many({"tenant": tenant, "subject": subject})).deleted_count)

    async def backfill(self) -> None:
        """Vectors stored in their groups' `v` (before these blocks) moved here, once: each chunk written
        to its blocks, then taken from its groups; a start stopped part way finds the rest. It reads every
        group once (no index holds `v`): a new archive has none to read."""
        if await self._blocks.find_one({"_id": BACKFILLED}) is not None:
            return
        if not await self._groups.estimated_document_count():
            await self._blocks.update_one({"_id": BACKFILLED}, {"$set": {"at": 0}}, upsert=True)
            return
        moved = 0
        while True:
            fields = {"v": 1, "m": 1, "tenant": 1, "thread": 1, "owner": 1, "conversation": 1, "subject": 1, "agent": 1}
            docs = await self._groups.find({"v": {"$exists": True}}, fields).limit(BACKFILL_CHUNK).to_list()
            if not docs:
                break
            await self._write(item for doc in docs for item in _items_of(doc))
            await self._groups.bulk_write(
                [UpdateOne({"_id": doc["_id"], **_thread(_ref_of(doc))}, {"$unset": {"v": ""}}) for doc in docs],
                ordered=False,
            )
            moved += len(docs)
        if moved:
            log.info("archive: the vectors of %d groups moved into %s", moved, VECTOR_BLOCKS)
        await self._blocks.update_one({"_id": BACKFILLED}, {"$set": {"at": moved}}, upsert=True)


def _thread(ref: ConversationRef) -> dict[str, str]:
    """The shard key (tenant, thread, owner), named beside `_id` as for the groups (mongo_groups.thread_of)."""
    return {"tenant": ref.tenant, "thread": ref.thread, "owner": ref.owner}


def _taken(name: Any, ref: ConversationRef, out: list[str], held: int) -> list[DeleteOne | UpdateOne]:
    """The write taking the runs `out` from a block holding `held` runs: none, the keys, or the block."""
    if not out:
        return []
    if len(out) >= held:
        return [DeleteOne({"_id": name, **_thread(ref)})]
    unset = {f"{field}.{key}": "" for key in out for field in ("v", "g")}
    return [UpdateOne({"_id": name, **_thread(ref)}, {"$unset": unset})]


def _ref_of(doc: dict[str, Any]) -> ConversationRef:
    return ConversationRef(doc["tenant"], doc["thread"], doc["owner"], doc["conversation"])


def _items_of(group: dict[str, Any]) -> Iterator[Item]:
    """A group's vectors as stored in its `v` before the blocks, each in its block (by its entry's place)."""
    ref, messages = _ref_of(group), group.get("m") or {}
    for key, vector in (group.get("v") or {}).items():
        n = (messages.get(key) or {}).get("n")
        block = block_of(n if isinstance(n, int) else None, _seq(key))
        yield Item(ref, group.get("subject"), group.get("agent"), block, _seq(key), str(group["_id"]), vector)
