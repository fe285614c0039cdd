"""The archive's writes of entries into their groups (MongoDB); see memlog/adapters/mongo_entries.py.

Kept apart from memlog/adapters/mongo_archives.py, whose MongoConversationArchive takes these methods in.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from memlog.adapters.archive_vectors import ArchiveVectors
from memlog.adapters.mongo_entries import (
    ARRAYS,
    Run,
    Tail,
    conversation_id,
    group_doc,
    group_update,
    tail_of,
)
from memlog.adapters.mongo_entries import where as _where
from memlog.adapters.mongo_postings import MongoPostings
from memlog.adapters.mongo_store import DUPLICATE_KEY
from memlog.adapters.mongo_vector_blocks import MongoVectorBlocks
from projections.archives import ConversationRef, Entry

log = logging.getLogger(__name__)


def duplicates(exc: BulkWriteError) -> set[int]:
    """The indexes of the writes refused for a duplicate key; any other error is raised."""
    errors = exc.details.get("writeErrors", [])
    if any(err.get("code") != DUPLICATE_KEY for err in errors):
        raise exc
    return {int(err["index"]) for err in errors}


@dataclass(frozen=True)
class Held:
    """What a conversation's document says of the entries stored: its last seq, its count of places
    (None: it holds entries from before there were places), and its tail group."""

    last_seq: int = -1
    count: int | None = 0
    tail: Tail | None = None


class ArchiveGroupWrites:
    """Mixed into MongoConversationArchive."""

    _entries: AsyncCollection[dict[str, Any]]
    _conversations: AsyncCollection[dict[str, Any]]
    _postings: MongoPostings
    _vector_blocks: MongoVectorBlocks
    _vectors: ArchiveVectors | None

    async def _write_groups(self, grouped: Sequence[Run]) -> None:
        """The groups written, then their runs' vectors (memlog/adapters/mongo_vector_blocks.py) and their
        entries' postings (memlog/adapters/mongo_postings.py): a posting or a vector names a group that
        holds its entry (one whose id another group held names nothing a search reads)."""
        vectors = await self._run_vectors(grouped)
        await self._write_group_docs(grouped)
        await self._vector_blocks.put(vectors)
        await self._postings.post((run.group, run.entries) for run in grouped)

    async def _run_vectors(self, grouped: Sequence[Run]) -> list[tuple[Entry, str, bytes]]:
        """Each run's vector (its entries' texts as one passage), with its first entry and group, when search
        has vectors. A model that fails leaves the runs without (searched by their words alone), and never
        stops the archive."""
        if self._vectors is None or not grouped:
            return []
        texts = ["\n".join(e.text for e in run.entries) for run in grouped]
        try:
            packed = await self._vectors.passages(texts)
        except Exception as exc:  # the model's own error, whatever it is: the words still archive
            log.warning("archive: no vectors for %d groups (%s: %s)", len(grouped), type(exc).__name__, exc)
            return []
        return [(min(run.entries, key=lambda e: e.seq), run.group, v) for run, v in zip(grouped, packed, strict=True)]

    async def _write_group_docs(self, grouped: Sequence[Run]) -> None:
        """New groups inserted in one bulk; a group that grows, or that a redelivery finds written,
        updated in place with the entries it does not hold yet (an entry it holds keeps what it became
        since: folded, reset, moved by a rename). An entry whose id its conversation holds in another
        group is dropped, as a repeated append is."""
        for entry in (e for run in grouped for e in run.entries if e.terms_cut):
            log.warning(
                "archive: entry %s of %s/%s indexed by its first %d distinct tokens, %d left out (marked terms_cut)",
                entry.entry_id,
                entry.ref.tenant,
                entry.ref.thread,
                len(entry.terms),
                entry.terms_cut,
            )
        fresh = [run for run in grouped if not run.grows]
        again = [run for run in grouped if run.grows]
        if fresh:
            try:
                await self._entries.insert_many([group_doc(run.group, run.entries) for run in fresh], ordered=False)
            except BulkWriteError as exc:
                again += [fresh[index] for index in sorted(duplicates(exc))]  # written before: a redelivery
        arrays: dict[Any, dict[str, Any]] = {}
        if again:  # an entry id the group holds already is stored (or an append repeated): left as it is
            arrays = {
                doc["_id"]: doc
                for doc in await self._entries.find(
                    {"_id": {"$in": [run.group for run in again]}}, dict.fromkeys(ARRAYS, 1)
                ).to_list()
            }
            again = [
                replace(run, entries=_new_ids(run, set(arrays.get(run.group, {}).get("ids", ())))) for run in again
            ]
            again = [run for run in again if run.entries]
        for attempt in range(2):
            if not again:
                return
            updates = [
                UpdateOne(
                    {"_id": run.group, **thread_of(run.entries[0].ref)},
                    group_update(run.entries, arrays.get(run.group)),
                    upsert=True,
                )
                for run in again
            ]
            try:
                await self._entries.bulk_write(updates, ordered=False)
                return
            except BulkWriteError as exc:
                refused = [again[index] for index in sorted(duplicates(exc))]
            if attempt:
                raise DuplicateKeyError(f"entries of groups {[run.group for run in refused]} refused twice")
            again = [run for run in await self._without_held_ids(refused) if run.entries]

    async def _without_held_ids(self, refused: list[Run]) -> list[Run]:
        """The runs without the entries whose ids another group of their conversation holds."""
        kept = []
        for run in refused:
            ref = run.entries[0].ref
            ids = [e.entry_id for e in run.entries]
            others = await self._entries.find({**_where(ref), "ids": {"$in": ids}}, {"ids": 1}).to_list()
            taken = {entry_id for doc in others if doc["_id"] != run.group for entry_id in doc.get("ids", ())}
            kept.append(replace(run, entries=tuple(e for e in run.entries if e.entry_id not in taken)))
        return kept

    async def _held(self, refs: set[ConversationRef]) -> dict[ConversationRef, Held]:
        """Each conversation's last seq, count of places given (projections/places.py; None for a
        conversation holding entries archived before there were places) and tail group."""
        ids = {conversation_id(ref): ref for ref in refs}
        docs = await self._conversations.find({"_id": {"$in": list(ids)}}, {"last_seq": 1, "n": 1, "tail": 1}).to_list()
        held: dict[ConversationRef, Held] = {}
        for doc in docs:
            last_seq = int(doc.get("last_seq", -1))
            count = int(doc["n"]) if doc.get("n") is not None else (0 if last_seq < 0 else None)
            held[ids[doc["_id"]]] = Held(last_seq, count, tail_of(doc))
        return held


def thread_of(ref: ConversationRef) -> dict[str, str]:
    """The shard key of a group (DESIGN.md), named beside `_id` by every update of one: MongoDB before 7.0
    refuses an upsert without it. SecantusDB reads an `_id` equality by its `_id` whatever else the
    filter names (its explain says COLLSCAN; measured 0.8 to 1.5 ms an update at 30,000 documents
    either way)."""
    return {"tenant": ref.tenant, "thread": ref.thread, "owner": ref.owner}


def _new_ids(run: Run, held: set[str]) -> tuple[Entry, ...]:
    return tuple(e for e in run.entries if e.entry_id not in held)
