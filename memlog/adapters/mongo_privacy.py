"""The key vault, the erasure ledger, export bundles, the namespace pointer and registry, in MongoDB.

They live in a database of their own (`MEMLOG_PRIVACY_DATABASE`), outside every projection
namespace: a replay into a fresh namespace must find the same keys gone and the same ledger.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError, OperationFailure

from memlog.adapters.mongo_store import mongo_errors
from projections import namespaces
from projections.namespaces import NamespaceEntry
from projections.periods import KeyPeriods, period_key_id, period_range, period_ref
from projections.ports import Clock, utc_now
from projections.sealing import new_data_key, subject_digest, subject_ref, tenant_ref, unwrap_key, wrap_key
from schemas.errors import Conflict, NotFound, StoreUnavailable, SubjectErasing

ACTIVE = "active"
ERASING = "erasing"
KEYS_PER_QUERY = 50
INDEX_OPTIONS_CONFLICT = (85, 86)  # IndexOptionsConflict, IndexKeySpecsConflict


class MongoKeyVault:
    """Data keys per (tenant, subject), wrapped by the master key; deleting them shreds the subject's events.

    A subject's standing key (`_id` its `subject_ref`) also holds its state (active or being erased);
    its period keys (`projections.periods`) are documents of their own, named by `period_ref`, with
    the subject's ref and the period's end, made only while the standing key is there and active.

    Args:
        database: the privacy database.
        master: the 32-byte master key from the settings.
        periods: how the log's time is cut into key periods.
    """

    def __init__(
        self, database: AsyncDatabase[dict[str, Any]], master: bytes, periods: KeyPeriods | None = None
    ) -> None:
        self._keys = database["keys"]
        self._master = master
        self._periods = periods or KeyPeriods()

    async def prepare(self) -> None:
        with mongo_errors():
            await self._keys.create_index("key_id", unique=True, name="by_key_id")
            await self._keys.create_index("ref", name="by_ref", sparse=True)
            await self._keys.create_index("ends_ms", name="by_period_end", sparse=True)

    async def _make(self, ref: str, key_id: str, fields: dict[str, Any]) -> tuple[str, bytes] | None:
        """Insert a new key under `ref`; None when another writer made it first."""
        data_key = new_data_key()
        nonce, wrapped = wrap_key(self._master, f"{ref}\x1f{key_id}", data_key)
        doc = {"_id": ref, "key_id": key_id, "nonce": nonce, "wrapped": wrapped, "state": ACTIVE, **fields}
        try:
            await self._keys.insert_one({**doc, "created_at": dt.datetime.now(dt.UTC)})
        except DuplicateKeyError:
            return None
        return key_id, data_key

    async def _standing(self, tenant: str, subject: str | None, make: bool) -> dict[str, Any] | None:
        ref = tenant_ref(tenant) if subject is None else subject_ref(tenant, subject)
        with mongo_errors():
            doc = await self._keys.find_one({"_id": ref})
            if doc is None and make:
                fields = {"tenant": tenant, "subject": subject}
                made = await self._make(ref, uuid.uuid4().hex, fields)
                doc = await self._keys.find_one({"_id": ref})  # ours, or another writer's made first
                if doc is None and made is not None:
                    raise StoreUnavailable(f"key vault: the key of {ref} vanished while it was being made")
        if doc is not None and doc["state"] != ACTIVE:
            raise SubjectErasing(tenant, subject or "")
        return doc

    async def _period_key(self, standing: dict[str, Any], at_ms: int) -> tuple[str, bytes]:
        """The period's key of the subject whose standing key is `standing`, made on first use."""
        label = self._periods.label(at_ms)
        ref = period_ref(str(standing["_id"]), label)
        with mongo_errors():
            doc = await self._keys.find_one({"_id": ref})
            if doc is None:
                fields = {"ref": standing["_id"], "period": label, "ends_ms": period_range(label)[1]}
                made = await self._make(ref, period_key_id(label), fields)
                if made is not None:
                    return made
                doc = await self._keys.find_one({"_id": ref})
        if doc is None:
            raise StoreUnavailable(f"key vault: the key of {ref} vanished while it was being made")
        if doc["state"] != ACTIVE:
            raise SubjectErasing(str(standing["tenant"]), str(standing["subject"] or ""))
        return str(doc["key_id"]), self._unwrap(doc)

    async def key_for_write(self, tenant: str, subject: str | None, at_ms: int | None = None) -> tuple[str, bytes]:
        """The subject's standing key (the tenant's without one), made on first use; with `at_ms`, the key
        of the period holding that instant instead. Refused while the subject is being erased."""
        if at_ms is not None and subject is not None and (both := await self._both(tenant, subject, at_ms)):
            return both
        doc = await self._standing(tenant, subject, make=True)
        assert doc is not None
        if at_ms is not None and subject is not None:
            return await self._period_key(doc, at_ms)
        return str(doc["key_id"]), self._unwrap(doc)

    async def key_in_use(self, tenant: str, subject: str | None, at_ms: int | None = None) -> tuple[str, bytes] | None:
        if at_ms is not None and subject is not None and (both := await self._both(tenant, subject, at_ms)):
            return both
        doc = await self._standing(tenant, subject, make=False)
        if doc is None:
            return None
        if at_ms is not None and subject is not None:
            return await self._period_key(doc, at_ms)
        return str(doc["key_id"]), self._unwrap(doc)

    async def _both(self, tenant: str, subject: str, at_ms: int) -> tuple[str, bytes] | None:
        """The period's key when the subject's standing key and that period's key are both there, read
        in one round trip (a sealing cache miss otherwise costs two); None when either is missing, for
        the two-step path to make it. Refused while the subject is being erased."""
        ref = subject_ref(tenant, subject)
        period = period_ref(ref, self._periods.label(at_ms))
        with mongo_errors():
            docs = {doc["_id"]: doc async for doc in self._keys.find({"_id": {"$in": [ref, period]}})}
        standing, doc = docs.get(ref), docs.get(period)
        if standing is None or doc is None:
            return None
        if standing["state"] != ACTIVE or doc["state"] != ACTIVE:
            raise SubjectErasing(tenant, subject)
        return str(doc["key_id"]), self._unwrap(doc)

    def _unwrap(self, doc: dict[str, Any]) -> bytes:
        return unwrap_key(self._master, f"{doc['_id']}\x1f{doc['key_id']}", bytes(doc["nonce"]), bytes(doc["wrapped"]))

    async def keys_by_id(self, key_ids: list[str]) -> dict[str, bytes]:
        """The active keys among these ids; an id left out belongs to an erased (or erasing) subject,
        or to a period whose key was shredded."""
        found: dict[str, bytes] = {}
        with mongo_errors():
            # A few dozen ids per query: SecantusDB answers one $in of 2,000 ids in about 4.5 s and
            # 40 queries of 50 in 0.3 s; MongoDB does not mind either way.
            for start in range(0, len(key_ids), KEYS_PER_QUERY):
                wanted = key_ids[start : start + KEYS_PER_QUERY]
                async for doc in self._keys.find({"key_id": {"$in": wanted}, "state": ACTIVE}):
                    found[str(doc["key_id"])] = self._unwrap(doc)
        return found

    @staticmethod
    def _all_of(tenant: str, subject: str) -> dict[str, Any]:
        ref = subject_ref(tenant, subject)
        return {"$or": [{"_id": ref}, {"ref": ref}]}

    async def begin_erasure(self, tenant: str, subject: str) -> None:
        """Stop the subject's keys being used, for writing or reading, while the subject's data is deleted."""
        with mongo_errors():
            await self._keys.update_many(self._all_of(tenant, subject), {"$set": {"state": ERASING}})

    async def delete(self, tenant: str, subject: str) -> int:
        """Delete every key of the subject, standing and per period; how many."""
        with mongo_errors():
            result = await self._keys.delete_many(self._all_of(tenant, subject))
        return int(result.deleted_count)

    async def shred_periods(self, ended_by_ms: int, limit: int = 1000) -> int:
        """Delete at most `limit` period keys whose period ended at or before `ended_by_ms`; how many."""
        with mongo_errors():
            found = self._keys.find({"ends_ms": {"$lte": ended_by_ms}}, {"_id": 1}).limit(limit)
            due = [doc["_id"] async for doc in found]
            if not due:
                return 0
            result = await self._keys.delete_many({"_id": {"$in": due}, "ends_ms": {"$lte": ended_by_ms}})
        return int(result.deleted_count)


class MongoLedger:
    """What operators asked for and what was done: erasures with their counts (never content), exports, replays.

    Subjects are named by a keyed digest (HMAC of tenant and subject under the master key), so the
    ledger itself holds nothing that identifies an erased person, yet answers "was this one erased?".

    Args:
        database: the privacy database.
        master: the 32-byte master key from the settings; it keys the digest.
        clock: when an entry is recorded; entries are listed newest first by it.
        keep_seconds: how long an entry is kept after it was recorded (a TTL index on `at`; MEMLOG_LEDGER_DAYS).
    """

    def __init__(
        self,
        database: AsyncDatabase[dict[str, Any]],
        master: bytes,
        clock: Clock = utc_now,
        keep_seconds: int = 365 * 86_400,
    ) -> None:
        self._database = database
        self._ledger = database["ledger"]
        self._master = master
        self._clock = clock
        self._keep = keep_seconds

    def digest(self, tenant: str, subject: str) -> str:
        return subject_digest(self._master, tenant, subject)

    async def prepare(self) -> None:
        with mongo_errors():
            await self._ledger.create_index(
                [("tenant", ASCENDING), ("subject_digest", ASCENDING), ("at", DESCENDING)], name="by_subject_digest"
            )
            await ensure_ttl(self._database, "ledger", "at", self._keep)

    async def record(self, kind: str, *, subject: str | None = None, **fields: Any) -> str:
        entry_id = str(fields.pop("entry_id", None) or uuid.uuid4())
        if subject is not None:
            fields["subject_digest"] = self.digest(fields["tenant"], subject)
        doc = {"_id": entry_id, "kind": kind, "at": self._clock(), **fields}
        with mongo_errors(), contextlib.suppress(DuplicateKeyError):  # recorded already: a redelivered event
            await self._ledger.insert_one(doc)
        return entry_id

    async def get(self, entry_id: str) -> dict[str, Any] | None:
        with mongo_errors():
            return await self._ledger.find_one({"_id": entry_id})

    async def entries(
        self,
        *,
        tenant: str | None = None,
        subject: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        before: tuple[dt.datetime, str] | None = None,
    ) -> list[dict[str, Any]]:
        query: dict[str, Any] = {}
        if before is not None:
            at, entry_id = before
            query["$or"] = [{"at": {"$lt": at}}, {"at": at, "_id": {"$lt": entry_id}}]
        if tenant is not None:
            query["tenant"] = tenant
        if subject is not None:
            if tenant is None:
                raise ValueError("a subject is only known within its tenant")
            query["subject_digest"] = self.digest(tenant, subject)
        if kind is not None:
            query["kind"] = kind
        with mongo_errors():
            order = [("at", DESCENDING), ("_id", DESCENDING)]
            return await self._ledger.find(query).sort(order).limit(limit).to_list()

    async def erased(self, tenant: str, subject: str) -> dict[str, Any] | None:
        """The latest completed erasure of a subject, if any."""
        with mongo_errors():
            found = (
                await self._ledger.find(
                    {"tenant": tenant, "subject_digest": self.digest(tenant, subject), "kind": "erased"}
                )
                .sort("at", DESCENDING)
                .limit(1)
                .to_list()
            )
        return found[0] if found else None


async def ensure_ttl(database: AsyncDatabase[dict[str, Any]], collection: str, field: str, seconds: int) -> None:
    """A TTL index on `field` that deletes a document `seconds` after it; a changed setting changes the
    index in place (collMod), as an index cannot be created again with other options."""
    try:
        await database[collection].create_index(field, expireAfterSeconds=seconds, name="aged_out")
    except OperationFailure as exc:
        if exc.code not in INDEX_OPTIONS_CONFLICT:
            raise
        index = {"name": "aged_out", "expireAfterSeconds": seconds}
        await database.command({"collMod": collection, "index": index})


# MongoDB refuses a document past 16 MiB (BSON's limit). A bundle goes in parts of at most 4 MiB, so a
# part and its few fields stay far below it whatever the bundle's size.
PART_BYTES = 4 * 1024 * 1024


class MongoExports:
    """Export bundles by request id, kept a day (TTL indexes) and deleted with the subject.

    `exports` holds one small document per whole bundle; `export_parts` its bytes in parts of at most
    `part_bytes`, written before that document, so a bundle is read only once it is all there.

    Args:
        database: the privacy database.
        keep_seconds: how long a bundle is kept.
        part_bytes: the most bytes one part document holds.
    """

    def __init__(
        self, database: AsyncDatabase[dict[str, Any]], keep_seconds: int = 86_400, part_bytes: int = PART_BYTES
    ) -> None:
        self._exports = database["exports"]
        self._parts = database["export_parts"]
        self._keep = keep_seconds
        self._part_bytes = part_bytes

    async def prepare(self) -> None:
        with mongo_errors():
            await self._exports.create_index("expires", expireAfterSeconds=0, name="kept_until")
            await self._exports.create_index([("tenant", ASCENDING), ("subject", ASCENDING)], name="by_subject")
            await self._parts.create_index("expires", expireAfterSeconds=0, name="kept_until")
            await self._parts.create_index([("request_id", ASCENDING), ("n", ASCENDING)], name="by_part", unique=True)
            await self._parts.create_index([("tenant", ASCENDING), ("subject", ASCENDING)], name="by_subject")

    async def put(self, request_id: str, tenant: str, subject: str, chunks: AsyncIterable[bytes]) -> int:
        now = dt.datetime.now(dt.UTC)
        expires = now + dt.timedelta(seconds=self._keep)
        with mongo_errors():
            await self._exports.delete_one({"_id": request_id})
            await self._parts.delete_many({"request_id": request_id})
        pending = bytearray()
        size = parts = 0

        async def flush(data: bytes) -> None:
            nonlocal parts
            part = {"request_id": request_id, "n": parts, "tenant": tenant, "subject": subject, "data": data}
            with mongo_errors():
                await self._parts.insert_one({**part, "expires": expires})
            parts += 1

        async for chunk in chunks:
            pending += chunk
            size += len(chunk)
            while len(pending) >= self._part_bytes:
                await flush(bytes(pending[: self._part_bytes]))
                del pending[: self._part_bytes]
        if pending or not parts:
            await flush(bytes(pending))
        whole = {"tenant": tenant, "subject": subject, "parts": parts, "size": size, "created_at": now}
        with mongo_errors():
            await self._exports.replace_one({"_id": request_id}, {**whole, "expires": expires}, upsert=True)
        return size

    async def get(self, request_id: str) -> dict[str, Any] | None:
        with mongo_errors():
            return await self._exports.find_one({"_id": request_id})

    async def read(self, request_id: str) -> AsyncIterator[bytes]:
        whole = await self.get(request_id)
        if whole is None:
            return
        for number in range(int(whole["parts"])):
            with mongo_errors():
                part = await self._parts.find_one({"request_id": request_id, "n": number})
            if part is None:
                raise NotFound(f"export {request_id} was erased or expired while it was read")
            yield bytes(part["data"])

    async def erase_subject(self, tenant: str, subject: str) -> int:
        who = {"tenant": tenant, "subject": subject}
        with mongo_errors():
            bundles = {str(doc["_id"]) async for doc in self._exports.find(who, {"_id": 1})}
            bundles |= {str(doc["request_id"]) async for doc in self._parts.find({**who, "n": 0}, {"request_id": 1})}
            await self._exports.delete_many(who)
            await self._parts.delete_many(who)
        return len(bundles)


class MongoNamespacePointer:
    """Which namespace reads and workers use, per app id; `memlog replay` moves it once a rebuild is done."""

    def __init__(self, privacy: AsyncDatabase[dict[str, Any]], app_id: str) -> None:
        self._namespaces = privacy["namespaces"]
        self._app_id = app_id

    async def active(self) -> str | None:
        with mongo_errors():
            doc = await self._namespaces.find_one({"_id": self._app_id})
        return None if doc is None else str(doc["namespace"])

    async def switch(self, namespace: str, **info: Any) -> None:
        """With `previous` in `info`, a compare-and-set: Conflict when the pointer names another namespace
        by now (a replay switches from the namespace it started from, or not at all)."""
        where: dict[str, Any] = {"_id": self._app_id}
        if info.get("previous") is not None:
            where["namespace"] = info["previous"]
        with mongo_errors():
            try:
                await self._namespaces.replace_one(where, {"namespace": namespace, **info}, upsert=True)
                return
            except DuplicateKeyError:
                now = await self.active()
        raise Conflict(f"the namespace pointer moved from {info['previous']} to {now} meanwhile: not switched")


class MongoNamespaceRegistry:
    """The namespaces of one app id (projections.namespaces), one document each in `namespace_registry`.

    Args:
        privacy: the privacy database, which every namespace shares.
        app_id: whose namespaces; apps sharing the database keep theirs apart.
        clock: when a state changes or a replay is heard of.
    """

    def __init__(self, privacy: AsyncDatabase[dict[str, Any]], app_id: str, clock: Clock = utc_now) -> None:
        self._registry = privacy["namespace_registry"]
        self._app_id = app_id
        self._clock = clock

    def _id(self, namespace: str) -> str:
        return f"{len(self._app_id)}:{self._app_id}:{namespace}"  # length-prefixed: no two (app, name) meet

    async def prepare(self) -> None:
        with mongo_errors():
            await self._registry.create_index([("app_id", ASCENDING), ("created_at", ASCENDING)], name="by_app")

    async def _set(self, namespace: str, fields: dict[str, Any]) -> None:
        created = {"app_id": self._app_id, "namespace": namespace, "created_at": fields["since"]}
        with mongo_errors():
            await self._registry.update_one(
                {"_id": self._id(namespace)}, {"$set": fields, "$setOnInsert": created}, upsert=True
            )

    async def building(self, namespace: str, note: str = "") -> None:
        held = await self.get(namespace)
        if held is not None and held.state == namespaces.ACTIVE:
            raise Conflict(f"{namespace} is the active namespace; a replay builds into a fresh one")
        now = self._clock()
        await self._set(
            namespace, {"state": namespaces.BUILDING, "since": now, "seen_at": now, "retired_at": None, "note": note}
        )

    async def heard(self, namespace: str) -> None:
        with mongo_errors():
            await self._registry.update_one({"_id": self._id(namespace)}, {"$set": {"seen_at": self._clock()}})

    async def activate(self, namespace: str) -> list[str]:
        held = await self.get(namespace)
        if held is None or held.state != namespaces.ACTIVE:
            await self._set(namespace, {"state": namespaces.ACTIVE, "since": self._clock(), "retired_at": None})
        others = {"app_id": self._app_id, "state": namespaces.ACTIVE, "namespace": {"$ne": namespace}}
        with mongo_errors():
            retired = [str(doc["namespace"]) async for doc in self._registry.find(others, {"namespace": 1})]
            if retired:
                now = self._clock()
                await self._registry.update_many(
                    {**others, "namespace": {"$in": retired}},
                    {"$set": {"state": namespaces.PREVIOUS, "since": now, "retired_at": now}},
                )
        return retired

    async def abandon(self, namespace: str, note: str) -> None:
        now = self._clock()
        with mongo_errors():
            await self._registry.update_one(
                {"_id": self._id(namespace), "state": namespaces.BUILDING},
                {"$set": {"state": namespaces.ABANDONED, "since": now, "retired_at": now, "note": note}},
            )

    async def adopt(self, namespace: str, note: str) -> bool:
        now = self._clock()
        doc = {
            "_id": self._id(namespace),
            "app_id": self._app_id,
            "namespace": namespace,
            "state": namespaces.PREVIOUS,
            "created_at": now,
            "since": now,
            "retired_at": now,
            "seen_at": None,
            "note": note,
        }
        with mongo_errors():
            try:
                await self._registry.insert_one(doc)
            except DuplicateKeyError:
                return False
        return True

    async def get(self, namespace: str) -> NamespaceEntry | None:
        with mongo_errors():
            doc = await self._registry.find_one({"_id": self._id(namespace)})
        return None if doc is None else _entry(doc)

    async def entries(self) -> list[NamespaceEntry]:
        with mongo_errors():
            docs = (
                await self._registry.find({"app_id": self._app_id})
                .sort([("created_at", 1), ("namespace", 1)])
                .to_list()
            )
        return [_entry(doc) for doc in docs]

    async def remove(self, namespace: str) -> None:
        with mongo_errors():
            await self._registry.delete_one({"_id": self._id(namespace)})


def _entry(doc: dict[str, Any]) -> NamespaceEntry:
    return NamespaceEntry(
        namespace=str(doc["namespace"]),
        state=str(doc["state"]),
        created_at=doc["created_at"],
        since=doc["since"],
        retired_at=doc.get("retired_at"),
        seen_at=doc.get("seen_at"),
        note=str(doc.get("note") or ""),
    )


class MongoReplayRecords:
    """Replays started through the API (projections.replays), one document each in `replays`.

    Args:
        privacy: the privacy database, which every namespace shares.
        app_id: whose replays; apps sharing the database keep theirs apart.
    """

    def __init__(self, privacy: AsyncDatabase[dict[str, Any]], app_id: str) -> None:
        self._replays = privacy["replays"]
        self._app_id = app_id

    def _id(self, replay_id: str) -> str:
        return f"{len(self._app_id)}:{self._app_id}:{replay_id}"  # length-prefixed: no two (app, id) meet

    async def prepare(self) -> None:
        with mongo_errors():
            await self._replays.create_index([("app_id", ASCENDING), ("state", ASCENDING)], name="by_state")

    async def save(self, replay_id: str, record: dict[str, Any]) -> None:
        with mongo_errors():
            await self._replays.replace_one(
                {"_id": self._id(replay_id)}, {**record, "app_id": self._app_id}, upsert=True
            )

    async def get(self, replay_id: str) -> dict[str, Any] | None:
        with mongo_errors():
            doc = await self._replays.find_one({"_id": self._id(replay_id)}, {"_id": 0, "app_id": 0})
        return doc

    async def running(self) -> list[dict[str, Any]]:
        with mongo_errors():
            query = {"app_id": self._app_id, "state": "running"}
            return await self._replays.find(query, {"_id": 0, "app_id": 0}).to_list()
