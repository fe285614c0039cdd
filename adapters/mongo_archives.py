"""Conversation archives and idempotency reservations in MongoDB (any server speaking its wire protocol).

`entries`: one document per archived entry, `_id` = the position it came from, so a redelivered
event inserts nothing; a unique index keeps an entry id once per conversation. `conversations`:
one metadata document per conversation. No `$text` index: `terms` (ASCII tokens) is a multikey
index that narrows candidates; the pure matcher in projections/archives.py decides.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

from pymongo import ASCENDING, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError

from adapters.mongo_calendar import ArchiveCalendarReads
from adapters.mongo_entries import conversation_id, entry_doc, entry_of_doc
from adapters.mongo_entries import where as _where
from adapters.mongo_places import ArchiveNeighbourReads
from adapters.mongo_scans import above, at_most, docs_where, equals, ids_where, in_seq_order, update_ids
from adapters.mongo_store import DUPLICATE_KEY, mongo_errors
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
    in_scope,
    meta_after_entry,
)
from projections.places import number
from projections.ports import PENDING_SECONDS, Clock, utc_now
from schemas.events import KEY_SEPARATOR, MAIN_CONVERSATION


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
    )


def _ignore_duplicates(exc: BulkWriteError) -> None:
    if any(err.get("code") != DUPLICATE_KEY for err in exc.details.get("writeErrors", [])):
        raise exc


LEGACY_RAW_COPY = "archive"  # before issue 17 every thread event was also kept here, raw, and never read


class MongoConversationArchive(ArchiveCalendarReads, ArchiveNeighbourReads):
    """The conversation archive; see projections/ports.py ConversationArchive for the contract."""

    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._entries = database["entries"]
        self._conversations = database["conversations"]
        self._legacy = database[LEGACY_RAW_COPY]

    async def prepare(self) -> None:
        with mongo_errors():
            await self._legacy.drop()  # the raw copy memlog no longer keeps (issue 17): nothing reads it
            await self._entries.create_index(
                [
                    ("tenant", ASCENDING),
                    ("thread", ASCENDING),
                    ("owner", ASCENDING),
                    ("conversation", ASCENDING),
                    ("entry_id", ASCENDING),
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
                    ("seq", ASCENDING),
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
            entries, counts = number(entries, await self._places_held({e.ref for e in entries}))
            try:
                await self._entries.insert_many([entry_doc(e) for e in entries], ordered=False)
            except BulkWriteError as exc:
                _ignore_duplicates(exc)
            last: dict[ConversationRef, ConversationMeta | None] = {}
            for entry in entries:
                last[entry.ref] = meta_after_entry(last.get(entry.ref), entry)
            updates = []
            for ref, meta in last.items():
                assert meta is not None
                update: dict[str, Any] = {
                    "$set": {
                        **_where(ref),
                        "last_seq": meta.last_seq,
                        "subject": meta.subject,
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
            try:
                await self._conversations.bulk_write(updates, ordered=False)
            except BulkWriteError as exc:
                _ignore_duplicates(exc)  # that conversation holds this position already

    async def _places_held(self, refs: set[ConversationRef]) -> dict[ConversationRef, tuple[int, int | None]]:
        """Each conversation's last seq and count of places given (projections/places.py); None for a
        conversation holding entries archived before there were places (no count on its document)."""
        ids = {conversation_id(ref): ref for ref in refs}
        docs = await self._conversations.find({"_id": {"$in": list(ids)}}, {"last_seq": 1, "n": 1}).to_list()
        held: dict[ConversationRef, tuple[int, int | None]] = {}
        for doc in docs:
            last_seq = int(doc.get("last_seq", -1))
            count = int(doc["n"]) if doc.get("n") is not None else (0 if last_seq < 0 else None)
            held[ids[doc["_id"]]] = (last_seq, count)
        return held

    async def _archive_generation(self, op: ArchiveGeneration) -> None:
        where = {**_where(op.ref), "seq": {"$lt": op.before}}  # and reset_at NEVER, checked on what comes back
        live = equals("reset_at", NEVER)
        with mongo_errors():
            if op.kind == "reset":
                ids = await ids_where(self._entries, where, ("reset_at",), live)
                await update_ids(
                    self._entries, ids, {"$addToSet": {"archives": op.archive_id}, "$set": {"reset_at": op.before}}
                )
            else:
                active = equals("compacted_at", NEVER)
                docs = await self._entries.find(where, {"reset_at": 1, "compacted_at": 1, "exchange_id": 1}).to_list()
                kept = [doc for doc in docs if live(doc) and active(doc)]
                archived = {"$addToSet": {"archives": op.archive_id}}
                await update_ids(self._entries, [doc["_id"] for doc in kept], archived)
                covers = set(op.covers)
                covered = [doc["_id"] for doc in kept if _covered(doc.get("exchange_id"), covers)]
                await update_ids(self._entries, covered, {"$set": {"compacted_at": op.before}})
            unset = {"$set": {"open_exchange": None}} if op.kind == "reset" else {}
            await self._conversations.update_one(
                {"_id": conversation_id(op.ref)}, {"$addToSet": {"generations": op.archive_id}, **unset}
            )

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
            await self._entries.update_many(
                {**_where(op.ref), "seq": {"$lt": op.before}}, {"$set": {"conversation": op.target}}
            )
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
            )
            copies = [replace(c, n=n) for n, c in enumerate(forked([entry_of_doc(d) for d in docs], op))]
            if copies:
                try:
                    await self._entries.insert_many([entry_doc(e) for e in copies], ordered=False)
                except BulkWriteError as exc:
                    _ignore_duplicates(exc)
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
        with mongo_errors():
            found = await self._conversations.find_one({"_id": conversation_id(op.ref)})
            if op.expect_last_seq is not None and (found is None or int(found["last_seq"]) != op.expect_last_seq):
                return  # retention: the conversation changed since it was found eligible
            await self._entries.delete_many({**_where(op.ref), "seq": {"$lt": op.before}})
            if found is not None and int(found.get("last_seq", -1)) < op.before:
                await self._conversations.delete_one({"_id": conversation_id(op.ref)})

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
            docs = await self._conversations.find(query).sort("last_at", ASCENDING).to_list()
        return [_meta(d) for d in docs]

    def candidate_query(
        self, tenant: str, thread: str, owner: str, terms: list[str], *, conversation: str | None
    ) -> dict[str, Any]:
        """The MongoDB filter search issues (the benchmark times it raw).

        Equality on the thread and the terms only: SecantusDB's planner falls back to a collection scan
        when a range joins them, so scope, snapshot and dates are checked on what comes back.
        """
        query: dict[str, Any] = {"tenant": tenant, "thread": thread, "owner": owner}
        if conversation is not None:
            query["conversation"] = conversation
        if terms:
            query["terms"] = {"$in": terms}
        return query

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
    ) -> list[Entry]:
        query = self.candidate_query(tenant, thread, owner, terms, conversation=conversation)
        with mongo_errors():
            docs = await self._entries.find(query, {"terms": 0}).to_list()
        found = (entry_of_doc(d) for d in docs)
        return [
            e
            for e in found
            if in_scope(e, scope, snapshot)
            and (since is None or e.occurred_at >= since)
            and (until is None or e.occurred_at < until)
        ]

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
            docs = await in_seq_order(self._entries, _where(ref), seq, keep, limit, fields={"terms": 0})
        return [entry_of_doc(d) for d in docs]

    async def occurrences(self, tenant: str, thread: str, owner: str, entry_id: str) -> list[Entry]:
        """Every conversation's entry with this id (a fork copies ids): the caller prefers the live one."""
        thread_of = {"tenant": tenant, "thread": thread, "owner": owner}  # the id checked on what comes back
        with mongo_errors():
            docs = await docs_where(self._entries, thread_of, ("entry_id",), lambda doc: doc["entry_id"] == entry_id)
        return [entry_of_doc(d) for d in docs]

    # --- erasure hooks (issue 7 plugs these into its cascade) ---------------------------------

    async def erase_subject(self, tenant: str, subject: str) -> int:
        """Every archived entry and conversation of the subject; how many documents were deleted."""
        with mongo_errors():
            entries = await self._entries.delete_many({"tenant": tenant, "subject": subject})
            metas = await self._conversations.delete_many({"tenant": tenant, "subject": subject})
            # an older worker still running through an upgrade may write the raw copy again
            legacy = await self._legacy.delete_many({"tenant": tenant, "subject": subject})
        return int(entries.deleted_count + metas.deleted_count + legacy.deleted_count)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        with mongo_errors():
            docs = (
                await self._entries.find({"tenant": tenant, "subject": subject}, {"terms": 0})
                .sort("seq", ASCENDING)
                .to_list()
            )
        return [{**entry_of_doc(d).view(), "original": d.get("original")} for d in docs]


def _any(_: dict[str, Any]) -> bool:
    return True


def _covered(exchange_id: Any, covers: set[str]) -> bool:
    """MongoDB's `{"exchange_id": {"$in": covers}}`."""
    return isinstance(exchange_id, str) and exchange_id in covers


def _aware(moment: Any) -> dt.datetime:
    """A stored date as an aware UTC datetime; a reservation without one has lapsed."""
    if not isinstance(moment, dt.datetime):
        return dt.datetime.min.replace(tzinfo=dt.UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


class MongoIdempotency:
    """Idempotency keys reserved before anything is produced: a unique `_id` insert decides, synchronously.

    Args:
        database: the namespace's database.
        ttl_seconds: how long a key is remembered (MEMLOG_IDEMPOTENCY_TTL_SECONDS).
        clock: the time reservations are dated and lapse by.
    """

    def __init__(self, database: AsyncDatabase[dict[str, Any]], ttl_seconds: int, clock: Clock = utc_now) -> None:
        self._keys = database["idempotency"]
        self._ttl = ttl_seconds
        self._clock = clock

    async def prepare(self) -> None:
        with mongo_errors():
            await self._keys.create_index("expires", expireAfterSeconds=0, name="kept_until")
            await self._keys.create_index([("tenant", ASCENDING), ("subject", ASCENDING)], name="by_subject")

    @staticmethod
    def _id(tenant: str, thread: str, owner: str, key: str) -> str:
        return f"{len(tenant)}:{KEY_SEPARATOR.join((tenant, thread, owner, key))}"

    async def reserve(
        self, tenant: str, thread: str, owner: str, key: str, subject: str | None, digest: str | None = None
    ) -> dict[str, Any] | None:
        """None when this call holds the key now; else what the key holds (pending, or the accepted answer).

        A pending reservation lapses after PENDING_SECONDS: an attempt that died between reserving and
        answering (its store went away before it could let go) must not block every retry for a day.
        """
        now = self._clock()
        key_id = self._id(tenant, thread, owner, key)
        doc = {
            "_id": key_id,
            "tenant": tenant,
            "subject": subject,
            "state": "pending",
            "digest": digest,
            "pending_until": now + dt.timedelta(seconds=PENDING_SECONDS),
            "expires": now + dt.timedelta(seconds=self._ttl),
        }
        with mongo_errors():
            try:
                await self._keys.insert_one(doc)
                return None
            except DuplicateKeyError:
                found = await self._keys.find_one({"_id": key_id})
            if found is not None and found.get("state") == "pending" and _aware(found.get("pending_until")) < now:
                taken = await self._keys.update_one(
                    {"_id": key_id, "state": "pending", "pending_until": found.get("pending_until")},
                    {"$set": {"pending_until": doc["pending_until"], "expires": doc["expires"], "digest": digest}},
                )
                if taken.modified_count == 1:
                    return None  # the lapsed attempt's key is this call's now
                found = await self._keys.find_one({"_id": key_id})
        if found is None:  # expired and deleted between the two calls: take it again
            return await self.reserve(tenant, thread, owner, key, subject, digest)
        return found

    async def complete(self, tenant: str, thread: str, owner: str, key: str, accepted: dict[str, Any]) -> None:
        with mongo_errors():
            await self._keys.update_one(
                {"_id": self._id(tenant, thread, owner, key)}, {"$set": {"state": "done", "accepted": accepted}}
            )

    async def release(self, tenant: str, thread: str, owner: str, key: str) -> None:
        with mongo_errors():
            await self._keys.delete_one({"_id": self._id(tenant, thread, owner, key), "state": "pending"})

    async def drop(self, tenant: str, thread: str, owner: str, key: str, accepted: dict[str, Any]) -> None:
        held = {f"accepted.{name}": value for name, value in accepted.items()}
        with mongo_errors():
            await self._keys.delete_one({"_id": self._id(tenant, thread, owner, key), "state": "done", **held})

    async def erase_subject(self, tenant: str, subject: str) -> int:
        with mongo_errors():
            result = await self._keys.delete_many({"tenant": tenant, "subject": subject})
        return int(result.deleted_count)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        with mongo_errors():
            docs = await self._keys.find({"tenant": tenant, "subject": subject}, {"_id": 0, "expires": 0}).to_list()
        return docs
