"""Conversation archives in MongoDB (any server speaking its wire protocol).

`entry_groups` (memlog/adapters/mongo_entries.py): one document per exchange's run of entries, `_id` the
position of its first entry, each entry keyed by its own position inside, so a redelivered event
writes nothing new; a unique multikey index keeps an entry id once per conversation. A loaded
worker's batch writes one group per exchange (issue 16: at most two documents per exchange with the
conversations), inserted in bulk; a group the batch grows, or one a redelivery meets again, is
updated in place. `conversations`: one metadata document per conversation, holding its tail group.
No `$text` index: `terms` (ASCII tokens of every entry of a group) is a multikey index that narrows
candidates; the pure matcher in projections/archives.py decides.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from pymongo import ASCENDING, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError

from memlog.adapters.archive_vectors import ArchiveVectors
from memlog.adapters.mongo_bounded import ThreadBoundedReads
from memlog.adapters.mongo_calendar import ArchiveCalendarReads
from memlog.adapters.mongo_entries import (
    GROUPS,
    LEGACY_ENTRIES,
    WITHOUT_TERMS,
    WITHOUT_TEXTS,
    conversation_id,
    entries_of,
    entry_of_doc,
    group_doc,
    runs,
)
from memlog.adapters.mongo_entries import where as _where
from memlog.adapters.mongo_groups import ArchiveGroupWrites, Held, duplicates, thread_of
from memlog.adapters.mongo_places import ArchiveNeighbourReads
from memlog.adapters.mongo_postings import MongoPostings
from memlog.adapters.mongo_scans import above, at_most, equals, every, in_seq_order
from memlog.adapters.mongo_siblings import with_siblings
from memlog.adapters.mongo_store import mongo_errors
from memlog.adapters.mongo_vector_blocks import MongoVectorBlocks
from memlog.adapters.mongo_vectors import ArchiveNearest
from projections.archives import (
    NEVER,
    ArchiveGeneration,
    ArchiveOp,
    ConversationMeta,
    ConversationRef,
    Entry,
    EntryScope,
    ForkConversation,
    InsertEntries,
    MoveConversation,
    PurgeConversation,
    Scope,
    SetMeta,
    forked,
    index_terms,
    meta_after_entry,
    retention_purge_refusal,
)
from projections.generations import GenerationAge, generation_ages, generations_kept, taken_at
from projections.places import number
from projections.search import in_window
from schemas.events import MAIN_CONVERSATION

MIGRATION_CHUNK = 1000  # legacy entries converted per insert
log = logging.getLogger(__name__)


def _meta_doc(meta: ConversationMeta) -> dict[str, Any]:
    return {
        "_id": conversation_id(meta.ref),
        **_where(meta.ref),
        "subject": meta.subject,
        "kind": meta.kind,
        "created_at": meta.created_at,
        "created_by": meta.created_by,
        "last_at": meta.last_at,
        "last_seq": meta.last_seq,
        "archived": meta.archived,
        "protected": meta.protected,
        "label": meta.label,
        "open_exchange": meta.open_exchange,
        "generations": list(meta.generations),
    }


def _meta(doc: dict[str, Any]) -> ConversationMeta:
    return ConversationMeta(
        ref=ConversationRef(doc["tenant"], doc["thread"], doc["owner"], doc["conversation"]),
        subject=doc.get("subject"),
        kind=doc.get("kind", "main"),
        created_at=int(doc.get("created_at", 0)),
        created_by=int(doc.get("created_by", -1)),
        last_at=int(doc.get("last_at", 0)),
        last_seq=int(doc.get("last_seq", -1)),
        archived=bool(doc.get("archived", False)),
        protected=bool(doc.get("protected", False)),
        label=doc.get("label"),
        open_exchange=doc.get("open_exchange"),
        generations=tuple(doc.get("generations", ())),
        entries=doc["n"] if isinstance(doc.get("n"), int) and not isinstance(doc.get("n"), bool) else None,
    )


Vectors = ArchiveVectors | None  # each exchange's, computed as it is archived (None: search by words alone)
LEGACY_RAW_COPY = "archive"  # before issue 17 every thread event was also kept here, raw, and never read


class MongoConversationArchive(
    ArchiveGroupWrites, ArchiveCalendarReads, ArchiveNeighbourReads, ThreadBoundedReads, ArchiveNearest
):
    """The conversation archive; see projections/ports.py ConversationArchive for the contract."""

    def __init__(
        self, db: AsyncDatabase[dict[str, Any]], *, search_time_ms: int = 1000, vectors: Vectors = None
    ) -> None:
        """search_time_ms: maxTimeMS of a search's reads (MEMLOG_SEARCH_MAX_TIME_MS); vectors: MEMLOG_SEARCH_VECTORS."""
        self._search_time_ms, self._vectors = search_time_ms, vectors
        database = db
        self._entries = database[GROUPS]
        self._conversations = database["conversations"]
        self._legacy = database[LEGACY_RAW_COPY]
        self._legacy_entries = database[LEGACY_ENTRIES]
        self._postings = MongoPostings(database)
        self._vector_blocks = MongoVectorBlocks(database)

    async def prepare(self) -> None:
        with mongo_errors():
            await self._postings.prepare()
            await self._legacy.drop()  # the raw copy memlog no longer keeps (issue 17): nothing reads it
            await self._entries.create_index(
                [
                    ("tenant", ASCENDING),
                    ("thread", ASCENDING),
                    ("owner", ASCENDING),
                    ("conversation", ASCENDING),
                    ("ids", ASCENDING),
                ],
                name="entry_identity",
                unique=True,
            )
            await self._entries.create_index(
                [
                    ("tenant", ASCENDING),
                    ("thread", ASCENDING),
                    ("owner", ASCENDING),
                    ("conversation", ASCENDING),
                    ("last", ASCENDING),
                ],
                name="by_conversation",
            )
            await self._entries.create_index(
                [("tenant", ASCENDING), ("thread", ASCENDING), ("owner", ASCENDING), ("terms", ASCENDING)],
                name="by_term",
            )
            await self._entries.create_index([("tenant", ASCENDING), ("subject", ASCENDING)], name="by_subject")
            await self._conversations.create_index([("tenant", ASCENDING), ("last_at", ASCENDING)], name="by_age")
            await self._conversations.create_index(
                [("tenant", ASCENDING), ("thread", ASCENDING), ("owner", ASCENDING)], name="by_thread"
            )
        await self.prepare_calendar()
        await self.prepare_places()
        await self._migrate()
        with mongo_errors():
            await self._vector_blocks.prepare(backfill=self._vectors is not None)

    async def _migrate(self) -> None:
        """Entries archived one document each (before issue 16) become groups of one, then their
        collection goes: a group of one is a group like any other (a range of one seq)."""
        moved = 0
        with mongo_errors():
            while True:
                docs = await self._legacy_entries.find({}).limit(MIGRATION_CHUNK).to_list()
                if not docs:
                    break
                if not moved:
                    log.info("archive: moving entries kept one document each into groups (once)")
                groups = [group_doc(str(doc["_id"]), [entry_of_doc(doc)]) for doc in docs]
                try:
                    await self._entries.insert_many(groups, ordered=False)
                except BulkWriteError as exc:
                    duplicates(exc)  # converted already (an earlier start stopped part way)
                await self._legacy_entries.delete_many({"_id": {"$in": [doc["_id"] for doc in docs]}})
                moved += len(docs)
                if moved % (100 * MIGRATION_CHUNK) == 0:
                    log.info("archive: %d entries moved into groups so far", moved)
            if moved:
                log.info("archive: %d entries moved into groups", moved)
            if LEGACY_ENTRIES in await self._legacy_entries.database.list_collection_names():
                await self._legacy_entries.drop()

    # --- writes -----------------------------------------------------------------------------

    async def apply(self, ops: list[ArchiveOp]) -> None:
        for op in ops:
            if isinstance(op, InsertEntries):
                await self._insert(list(op.entries))
            elif isinstance(op, ArchiveGeneration):
                await self._archive_generation(op)
            elif isinstance(op, MoveConversation):
                await self._move(op)
            elif isinstance(op, ForkConversation):
                await self._fork(op)
            elif isinstance(op, SetMeta):
                await self._set_meta(op)
            else:
                await self._purge(op)

    async def insert_entries(self, entries: list[Entry]) -> None:
        """Bulk load (benchmarks, restores): the same writes as appending them."""
        await self._insert(entries)

    async def _insert(self, entries: list[Entry]) -> None:
        if not entries:
            return
        with mongo_errors():
            held = await self._held({e.ref for e in entries})
            places = {ref: (h.last_seq, h.count) for ref, h in held.items()}
            entries, counts = number(entries, places)
            # an entry at or below its conversation's last seq is stored: the conversation is written last
            fresh = [e for e in entries if e.seq > held.get(e.ref, Held()).last_seq]
            tails = {ref: h.tail for ref, h in held.items() if h.tail is not None}
            grouped, after = runs(fresh, tails)
            await self._write_groups(grouped)
            last: dict[ConversationRef, ConversationMeta | None] = {}
            for entry in entries:
                last[entry.ref] = meta_after_entry(last.get(entry.ref), entry)
            updates = []
            for ref in dict.fromkeys(e.ref for e in fresh):
                meta = last[ref]
                assert meta is not None
                update: dict[str, Any] = {
                    "$set": {
                        **_where(ref),
                        "last_seq": meta.last_seq,
                        "subject": meta.subject,
                        "tail": after[ref].doc(),
                        **({"n": counts[ref]} if ref in counts else {}),
                    },
                    "$max": {"last_at": meta.last_at},
                    "$setOnInsert": {
                        "kind": meta.kind,
                        "created_at": meta.created_at,
                        "created_by": meta.created_by,
                        "archived": False,
                        "protected": False,
                        "label": None,
                        "generations": [],
                    },
                }
                if meta.open_exchange is not None:
                    update["$set"]["open_exchange"] = meta.open_exchange
                elif any(e.role == "answer" for e in entries if e.ref == ref):
                    update["$set"]["open_exchange"] = None
                # "$not $gte": also matches a new document, and routes through the _id index (see facts)
                updates.append(
                    UpdateOne(
                        {"_id": conversation_id(ref), "last_seq": {"$not": {"$gte": meta.last_seq}}},
                        update,
                        upsert=True,
                    )
                )
            if updates:
                try:
                    await self._conversations.bulk_write(updates, ordered=False)
                except BulkWriteError as exc:
                    duplicates(exc)  # that conversation holds this position already

    async def _end_tail(self, ref: ConversationRef, before: int) -> None:
        """A thread operation at `before` ends the conversation's tail group (unless redelivered)."""
        await self._conversations.update_one(
            {"_id": conversation_id(ref), "last_seq": {"$lt": before}}, {"$unset": {"tail": ""}}
        )

    async def _entries_below(self, ref: ConversationRef, before: int) -> list[dict[str, Any]]:
        """The conversation's entries before `before`, without their texts and originals: a fold or a
        reset reads their scope and exchange only."""
        return await in_seq_order(self._entries, _where(ref), {"$lt": before}, every, None, fields=WITHOUT_TEXTS)

    async def _set_in_entries(
        self, ref: ConversationRef, docs: list[dict[str, Any]], changes: dict[str, dict[str, Any]]
    ) -> None:
        """`changes` (per entry's store id: update operators and the entry's fields they set) applied
        to those of the entries `docs` in their groups: one update per group."""
        per_group: dict[str, dict[str, dict[str, Any]]] = {}
        for doc in docs:
            change = changes.get(doc["_id"])
            if change:
                group = per_group.setdefault(doc["group"], {})
                for operator, fields in change.items():
                    group.setdefault(operator, {}).update(
                        {f"m.s{doc['seq']}.{name}": value for name, value in fields.items()}
                    )
        if per_group:
            await self._entries.bulk_write(
                [UpdateOne({"_id": group, **thread_of(ref)}, update) for group, update in per_group.items()]
            )

    async def _archive_generation(self, op: ArchiveGeneration) -> None:
        live = equals("reset_at", NEVER)
        with mongo_errors():
            docs = await self._entries_below(op.ref, op.before)
            changes: dict[str, dict[str, Any]] = {}
            if op.kind == "reset":
                for doc in docs:
                    if live(doc):
                        changes[doc["_id"]] = {
                            "$addToSet": {"archives": op.archive_id},
                            "$set": {"reset_at": op.before},
                        }
            else:
                active = equals("compacted_at", NEVER)
                covers = set(op.covers)
                for doc in docs:
                    if live(doc) and active(doc):
                        change: dict[str, Any] = {"$addToSet": {"archives": op.archive_id}}
                        if _covered(doc.get("exchange_id"), covers):
                            change["$set"] = {"compacted_at": op.before}
                        changes[doc["_id"]] = change
            await self._set_in_entries(op.ref, docs, changes)
            unset = {"$set": {"open_exchange": None}} if op.kind == "reset" else {}
            await self._conversations.update_one(
                {"_id": conversation_id(op.ref)}, {"$addToSet": {"generations": op.archive_id}, **unset}
            )
            await self._end_tail(op.ref, op.before)

    async def _claim_target(self, source: ConversationRef, target: str, before: int) -> ConversationMeta | None:
        """The target's metadata, reserved for this operation; None when it belongs to another one."""
        ref = ConversationRef(source.tenant, source.thread, source.owner, target)
        held = await self._conversations.find_one({"_id": conversation_id(ref)})
        if held is not None:
            meta = _meta(held)
            return meta if meta.created_by == before else None
        found = await self._conversations.find_one({"_id": conversation_id(source)})
        base = _meta(found) if found else ConversationMeta(ref=source)
        kind = "task" if source.conversation == MAIN_CONVERSATION and base.kind == "main" else base.kind
        meta = ConversationMeta(
            ref=ref,
            subject=base.subject,
            kind=kind,
            created_at=base.created_at,
            created_by=before,
            last_at=base.last_at,
            last_seq=-1,
            label=base.label,
        )
        try:
            await self._conversations.insert_one(_meta_doc(meta))
        except DuplicateKeyError:
            return None
        return meta

    async def _move(self, op: MoveConversation) -> None:
        with mongo_errors():
            found = await self._conversations.find_one({"_id": conversation_id(op.ref)})
            claimed = await self._claim_target(op.ref, op.target, op.before)
            if claimed is None:
                return  # the target exists: refused, as the API refuses it
            target = ConversationRef(op.ref.tenant, op.ref.thread, op.ref.owner, op.target)
            # no group spans the rename (each operation ends the tail): whole groups move
            await self._entries.update_many(
                {**_where(op.ref), "last": {"$lt": op.before}}, {"$set": {"conversation": op.target}}
            )
            await self._postings.move_below(op.ref, op.before, op.target)
            await self._vector_blocks.move_below(op.ref, op.before, op.target)
            await self._end_tail(op.ref, op.before)
            if found is not None:
                source = _meta(found)
                moved = _meta_doc(replace(source, ref=target, created_by=op.before, open_exchange=None))
                if "n" in found:  # the moved entries keep their places (without a count: none given)
                    moved["n"] = int(found["n"])
                await self._conversations.replace_one({"_id": moved["_id"]}, moved)
                if source.last_seq < op.before:
                    await self._conversations.delete_one({"_id": conversation_id(op.ref)})

    async def _fork(self, op: ForkConversation) -> None:
        with mongo_errors():
            claimed = await self._claim_target(op.ref, op.target, op.before)
            if claimed is None:
                return  # the target exists, or is the source: refused
            live, active = equals("reset_at", NEVER), equals("compacted_at", NEVER)
            docs = await in_seq_order(
                self._entries,
                _where(op.ref),
                {"$lt": op.before},
                lambda doc: live(doc) and active(doc),
                op.entries,
                descending=True,
                fields=WITHOUT_TERMS,
            )
            copies = [
                replace(c, n=n, terms=index_terms(c.text))
                for n, c in enumerate(forked([entry_of_doc(d) for d in docs], op))
            ]
            await self._end_tail(op.ref, op.before)
            if copies:
                await self._write_groups(runs(copies, {})[0])
                newest = copies[-1]
                await self._conversations.update_one(
                    {"_id": conversation_id(newest.ref)},
                    {"$max": {"last_seq": newest.seq, "last_at": max(e.occurred_at for e in copies), "n": len(copies)}},
                )

    async def _set_meta(self, op: SetMeta) -> None:
        changes = {
            name: value
            for name, value in (
                ("archived", op.archived),
                ("protected", op.protected),
                ("kind", op.kind),
                ("label", op.label),
            )
            if value is not None
        }
        if changes:
            with mongo_errors():
                await self._conversations.update_one({"_id": conversation_id(op.ref)}, {"$set": changes})

    async def _purge(self, op: PurgeConversation) -> None:
        if op.generations_until is not None:
            await self._purge_generations(op, op.generations_until)
            return
        with mongo_errors():
            found = await self._conversations.find_one({"_id": conversation_id(op.ref)})
            if op.expect_last_seq is not None and (found is None or int(found["last_seq"]) != op.expect_last_seq):
                return  # retention: the conversation changed since it was found eligible
            if op.retention and retention_purge_refusal(None if found is None else _meta(found), op.ref.conversation):
                return
            await self._entries.delete_many({**_where(op.ref), "last": {"$lt": op.before}})
            await self._postings.drop_below(op.ref, op.before)
            await self._vector_blocks.drop_below(op.ref, op.before)
            await self._end_tail(op.ref, op.before)
            if found is not None and int(found.get("last_seq", -1)) < op.before:
                await self._conversations.delete_one({"_id": conversation_id(op.ref)})

    async def _generation_docs(self, ref: ConversationRef) -> list[tuple[str, Entry]]:
        """Every entry of the conversation without its text, with its group (read for its scope and time)."""
        docs = await in_seq_order(self._entries, _where(ref), {}, every, None, fields=WITHOUT_TEXTS)
        return [(str(doc["group"]), entry_of_doc(doc)) for doc in docs]

    async def _purge_generations(self, op: PurgeConversation, until: int) -> None:
        """Main's generations taken out at `until` or before: their groups go whole (a group's entries
        share the offset that took them out, no group spanning a thread operation), with their postings;
        a group holding an entry still in the transcript stays."""
        with mongo_errors():
            found = await self._conversations.find_one({"_id": conversation_id(op.ref)})
            held = await self._generation_docs(op.ref)
            spared = {group for group, e in held if e.seq >= op.before or taken_at(e) > until}
            gone = sorted({group for group, _ in held} - spared)
            if gone:
                await self._entries.delete_many({**thread_of(op.ref), "_id": {"$in": gone}})
                await self._postings.drop_groups(op.ref, gone)
                await self._vector_blocks.drop_groups(op.ref, gone)
            await self._end_tail(op.ref, op.before)
            if found is not None:
                kept = generations_kept(_meta(found).generations, [e for group, e in held if group in spared])
                await self._conversations.update_one(
                    {"_id": conversation_id(op.ref)}, {"$set": {"generations": list(kept)}}
                )

    async def generation_ages(self, ref: ConversationRef) -> list[GenerationAge]:
        with mongo_errors():
            return generation_ages(e for _, e in await self._generation_docs(ref))

    # --- reads ------------------------------------------------------------------------------

    async def meta(self, ref: ConversationRef) -> ConversationMeta | None:
        with mongo_errors():
            doc = await self._conversations.find_one({"_id": conversation_id(ref)})
        return None if doc is None else _meta(doc)

    async def conversations(
        self, tenant: str, thread: str | None = None, owner: str | None = None
    ) -> list[ConversationMeta]:
        query: dict[str, Any] = {"tenant": tenant}
        if thread is not None:
            query["thread"] = thread
        if owner is not None:
            query["owner"] = owner
        with mongo_errors():
            found = self._conversations.find(query).sort("last_at", ASCENDING).max_time_ms(self._search_time_ms)
            docs = await found.to_list()
        return [_meta(d) for d in docs]

    async def tenants(self) -> list[str]:
        with mongo_errors():
            found: list[str] = await self._conversations.distinct("tenant")
        return sorted(found)

    async def candidates(
        self,
        tenant: str,
        thread: str,
        owner: str,
        terms: list[str],
        *,
        conversation: str | None,
        scope: Scope,
        snapshot: int,
        since: int | None = None,
        until: int | None = None,
        limit: int | None = None,
    ) -> list[Entry]:
        query = self.candidate_query(tenant, thread, owner, terms, conversation=conversation)
        cursor = self._entries.find(query, WITHOUT_TERMS).max_time_ms(self._search_time_ms)
        with mongo_errors():
            groups = await (cursor if limit is None else cursor.limit(limit)).to_list()
            docs = entries_of([g for g in groups if conversation is None or g.get("conversation") == conversation])
            found = await with_siblings(
                self._entries, list(map(entry_of_doc, docs)), WITHOUT_TERMS, self._search_time_ms
            )
        return in_window(found, scope, snapshot, since, until)

    async def entries(
        self,
        ref: ConversationRef,
        *,
        scope: EntryScope,
        snapshot: int,
        after_seq: int = -1,
        limit: int = 500,
        since: int | None = None,
        until: int | None = None,
    ) -> list[Entry]:
        """Entries in seq order after `after_seq`: current (export), history (all), or reset (reset archives);
        with a time range, those of the range (read from the time index: one local day, say)."""
        if since is not None or until is not None:  # one local day, say: read from the time index
            return [
                entry_of_doc(d) for d in await self.docs_between(ref, scope, snapshot, after_seq, limit, since, until)
            ]
        keep = {"current": above("reset_at", snapshot), "reset": at_most("reset_at", snapshot)}.get(scope, _any)
        seq = {"$gt": after_seq, "$lte": snapshot}
        with mongo_errors():
            docs = await in_seq_order(self._entries, _where(ref), seq, keep, limit, fields=WITHOUT_TERMS)
        return [entry_of_doc(d) for d in docs]

    async def occurrences(self, tenant: str, thread: str, owner: str, entry_id: str) -> list[Entry]:
        """Every conversation's entry with this id (a fork copies ids): the caller prefers the live one."""
        thread_of = {"tenant": tenant, "thread": thread, "owner": owner}  # the id checked on what comes back
        with mongo_errors():
            held = await self._entries.find(thread_of, {"ids": 1}).to_list()
            groups = [doc["_id"] for doc in held if entry_id in doc.get("ids", ())]
            docs = entries_of(await self._entries.find({"_id": {"$in": groups}}, WITHOUT_TERMS).to_list())
        return [entry_of_doc(d) for d in docs if d["entry_id"] == entry_id]

    # --- erasure hooks (issue 7 plugs these into its cascade) ---------------------------------

    async def erase_subject(self, tenant: str, subject: str) -> int:
        """Every archived entry and conversation of the subject; how many entries and documents were
        deleted. A shared conversation whose tail group was theirs forgets it (it named them)."""
        mine = {"tenant": tenant, "subject": subject}
        with mongo_errors():
            held = await self._entries.find(mine, {"ids": 1, "thread": 1, "owner": 1, "conversation": 1}).to_list()
            await self._entries.delete_many(mine)
            metas = await self._conversations.delete_many(mine)
            refs = {ConversationRef(tenant, doc["thread"], doc["owner"], doc["conversation"]) for doc in held}
            await self._postings.erase(subject, refs)
            await self._vector_blocks.erase(tenant, subject)
            shared = {conversation_id(ref) for ref in refs}
            if shared:
                await self._conversations.update_many(
                    {"_id": {"$in": sorted(shared)}, "tail.subject": subject}, {"$unset": {"tail": ""}}
                )
            # an older worker still running through an upgrade may write the raw copy, or entries one
            # document each, again
            legacy = await self._legacy.delete_many(mine)
            ungrouped = await self._legacy_entries.delete_many(mine)
        entries = sum(len(doc.get("ids", ())) for doc in held)
        return int(entries + metas.deleted_count + legacy.deleted_count + ungrouped.deleted_count)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        with mongo_errors():
            groups = await self._entries.find({"tenant": tenant, "subject": subject}, WITHOUT_TERMS).to_list()
        docs = sorted(entries_of(groups), key=lambda doc: int(doc["seq"]))
        return [{**entry_of_doc(d).view(), "original": d.get("original")} for d in docs]


def _any(_: dict[str, Any]) -> bool:
    return True


def _covered(exchange_id: Any, covers: set[str]) -> bool:
    """MongoDB's `{"exchange_id": {"$in": covers}}`."""
    return isinstance(exchange_id, str) and exchange_id in covers
