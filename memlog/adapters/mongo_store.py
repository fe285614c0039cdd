"""Archives in MongoDB (any server that speaks its wire protocol). Idempotent by the event's log position."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bson.errors import InvalidDocument
from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DocumentTooLarge, DuplicateKeyError, OperationFailure, PyMongoError

from projections.facts import Fact, SubjectFacts
from projections.ports import FACT_SLOT_SECONDS, Clock, HeldFacts, utc_now
from projections.position import Position
from projections.sealing import subject_ref
from projections.session import ThreadKey
from projections.traces import Served, merge_served, served_threads
from schemas.errors import Conflict, StoreRefused, StoreUnavailable

DUPLICATE_KEY = 11000


@contextmanager
def mongo_errors() -> Iterator[None]:
    """Translate pymongo's exceptions into memlog's at this edge: an outage is retried; a document the
    server or the BSON encoder refuses for what it holds is a refusal, so its record is dead-lettered."""
    try:
        yield
    except (InvalidDocument, DocumentTooLarge, UnicodeEncodeError) as exc:
        raise StoreRefused(f"mongodb refused the document: {exc}") from exc
    except OperationFailure as exc:
        if _transient(exc):
            raise StoreUnavailable(f"mongodb: {exc}") from exc
        raise StoreRefused(f"mongodb refused the write: {exc}") from exc
    except PyMongoError as exc:  # connection, selection and network errors
        raise StoreUnavailable(f"mongodb: {exc}") from exc


# Server error codes that mean "not now" (shutdown, elections, conflicts, time limits), not "never".
_TRANSIENT_CODES = frozenset({6, 7, 24, 46, 50, 89, 91, 112, 189, 251, 262, 9001, 10107, 11600, 11602, 13435, 13436})


def _transient(exc: OperationFailure) -> bool:
    if exc.has_error_label("RetryableWriteError") or exc.has_error_label("TransientTransactionError"):
        return True
    details = exc.details or {}
    codes = {exc.code} | {error.get("code") for error in details.get("writeErrors", [])}
    if details.get("writeConcernError"):
        return True
    return bool(codes & _TRANSIENT_CODES) or exc.code is None


def mongo_client(url: str, timeout_ms: int = 5000, **options: Any) -> AsyncMongoClient[dict[str, Any]]:
    """A client that gives up on an unreachable server after timeout_ms; options: credentials and TLS."""
    return AsyncMongoClient(
        url, serverSelectionTimeoutMS=timeout_ms, connectTimeoutMS=timeout_ms, tz_aware=True, **options
    )


class MongoCheckpoints:
    """Applied offsets per partition in the `applied` collection, raised with $max so they never go back."""

    def __init__(self, database: AsyncDatabase[dict[str, Any]], projection: str) -> None:
        self._applied = database["applied"]
        self._projection = projection

    def _id(self, topic: str, partition: int) -> str:
        return f"{self._projection}:{topic}:{partition}"

    async def applied(self, topic: str, partition: int) -> int:
        with mongo_errors():
            doc = await self._applied.find_one({"_id": self._id(topic, partition)})
        return -1 if doc is None else int(doc["offset"])

    async def applied_many(self, topic: str, partitions: Sequence[int]) -> list[int]:
        """Several partitions' checkpoints (the watchdog's round) in one round trip, -1 where none."""
        ids = [self._id(topic, partition) for partition in partitions]
        with mongo_errors():
            docs = await self._applied.find({"_id": {"$in": ids}}).to_list(None)
        offsets = {doc["_id"]: int(doc["offset"]) for doc in docs}
        return [offsets.get(_id, -1) for _id in ids]

    async def advance(self, position: Position) -> None:
        with mongo_errors():
            await self._applied.update_one(
                {"_id": self._id(position.topic, position.partition)},
                {"$max": {"offset": position.offset}},
                upsert=True,
            )

    async def advance_many(self, positions: Sequence[Position]) -> None:
        """Several partitions' positions (a batch's newest of each) in one round trip."""
        if len(positions) < 2:
            for position in positions:
                await self.advance(position)
            return
        updates = [
            UpdateOne({"_id": self._id(p.topic, p.partition)}, {"$max": {"offset": p.offset}}, upsert=True)
            for p in positions
        ]
        with mongo_errors():
            await self._applied.bulk_write(updates, ordered=False)


def _fact_doc(fact: Fact) -> dict[str, Any]:
    return {
        **fact.view(),
        "terms": list(fact.terms),  # memlog's own token index: no $text, so any MongoDB-compatible server works
        "vector": list(fact.vector),
        "vector_model": fact.vector_model,
    }


def _fact(doc: dict[str, Any]) -> Fact:
    return Fact(
        fact_id=doc["fact_id"],
        scope=doc["scope"],
        agent=doc.get("agent"),
        text=doc["text"],
        source=doc["source"],
        created_at=int(doc["created_at"]),
        updated_at=int(doc["updated_at"]),
        terms=tuple(doc.get("terms", ())),
        vector=tuple(doc.get("vector", ())),
        vector_model=doc.get("vector_model", ""),
    )


# The last instant a TTL date can name (9999-12-31): a later expiry means kept until then, not an error.
_LAST_EXPIRY_MS = 253_402_300_799_000  # 9999-12-31T23:59:59Z


def expiry(ms: int) -> dt.datetime:
    """A TTL index's date for an epoch-ms end (the TTL monitor reads dates; past year 9999, that year's end)."""
    return dt.datetime.fromtimestamp(min(ms, _LAST_EXPIRY_MS) / 1000, tz=dt.UTC)


async def insert_expiring(collection: Any, docs: list[dict[str, Any]]) -> int:
    """Inserts documents that carry `expires_at` (ms) with their TTL field; one already there (a redelivery) is
    skipped, anything else raises. Returns how many were new."""
    if not docs:
        return 0
    stored = [{**doc, "expires": expiry(int(doc["expires_at"]))} for doc in docs]
    with mongo_errors():
        try:
            result = await collection.insert_many(stored, ordered=False)
            return len(result.inserted_ids)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if any(err.get("code") != DUPLICATE_KEY for err in errors):
                raise
            return int(exc.details.get("nInserted", len(stored) - len(errors)))


class MongoFactStore:
    """One document per (tenant, subject) in `facts`, with the facts, their terms and a TTL date.

    Writes are conditional on the stored position (`pos`), so a redelivered event is a no-op; the
    kept-until date is raised with $max, so a question and a fact write never undo each other.
    """

    def __init__(self, database: AsyncDatabase[dict[str, Any]], checkpoints: MongoCheckpoints) -> None:
        self._facts = database["facts"]
        self._checkpoints = checkpoints

    @staticmethod
    def _id(tenant: str, subject: str) -> str:
        return f"{len(tenant)}:{tenant}:{subject}"

    async def applied(self, topic: str, partition: int) -> int:
        return await self._checkpoints.applied(topic, partition)

    async def applied_many(self, topic: str, partitions: Sequence[int]) -> list[int]:
        return await self._checkpoints.applied_many(topic, partitions)

    async def advance(self, position: Position) -> None:
        await self._checkpoints.advance(position)

    async def prepare(self) -> None:
        with mongo_errors():
            # the TTL monitor deletes a subject's memory 365 days after the last question; reads
            # also compare `expires_at`, so nothing expired is returned before the monitor runs
            await self._facts.create_index("expires", expireAfterSeconds=0, name="kept_until")
            await self._facts.create_index([("tenant", ASCENDING), ("subject", ASCENDING)], name="by_subject")

    async def erase_subject(self, tenant: str, subject: str) -> int:
        """The subject's facts, their token index and embeddings (all in one document); how many facts went."""
        with mongo_errors():
            doc = await self._facts.find_one_and_delete({"_id": self._id(tenant, subject)})
        return 0 if doc is None else len(doc.get("facts", []))

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        state = await self.load(tenant, subject)
        return [] if state is None else [fact.view() for fact in state.facts]

    async def load(self, tenant: str, subject: str) -> SubjectFacts | None:
        with mongo_errors():
            doc = await self._facts.find_one({"_id": self._id(tenant, subject)})
        if doc is None:
            return None
        return SubjectFacts(
            facts=tuple(_fact(fact) for fact in doc.get("facts", [])),
            last_question_at=int(doc.get("last_question_at", 0)),
            expires_at=int(doc.get("expires_at", 0)),
        )

    def _update(self, tenant: str, subject: str, state: SubjectFacts, position: Position) -> UpdateOne:
        return UpdateOne(
            # "$not $gte" also matches a document without `pos`, like an $or of the two would; unlike an
            # $or, SecantusDB routes it through the _id index (measured: 158 vs 3.6 updates/s at 3,000 docs)
            {"_id": self._id(tenant, subject), "pos": {"$not": {"$gte": position.offset}}},
            {
                "$set": {
                    "tenant": tenant,
                    "subject": subject,
                    "facts": [_fact_doc(fact) for fact in state.facts],
                    "pos": position.offset,
                },
                "$max": {
                    "last_question_at": state.last_question_at,
                    "expires_at": state.expires_at,
                    "expires": expiry(state.expires_at),
                },
            },
            upsert=True,
        )

    async def write(self, tenant: str, subject: str, state: SubjectFacts, position: Position) -> bool:
        return await self.write_many([(tenant, subject, state, position)]) == 1

    async def write_many(self, items: list[tuple[str, str, SubjectFacts, Position]]) -> int:
        """Several subjects in one round trip; those already at or past their position are skipped."""
        if not items:
            return 0
        with mongo_errors():
            try:
                result = await self._facts.bulk_write([self._update(*item) for item in items], ordered=False)
                return int(result.modified_count + result.upserted_count)
            except BulkWriteError as exc:
                # a duplicate key means the document holds this position or a later one: already applied
                errors = exc.details.get("writeErrors", [])
                if any(err.get("code") != DUPLICATE_KEY for err in errors):
                    raise
                return int(exc.details.get("nModified", 0)) + len(exc.details.get("upserted", []))

    async def questioned(self, asked: list[tuple[str, str, int]], keep_ms: int) -> None:
        # Upserted: the question may be applied before a fact of the same moment, from the other topic.
        if not asked:
            return
        updates = [
            UpdateOne(
                {"_id": self._id(tenant, subject)},
                {
                    "$setOnInsert": {"tenant": tenant, "subject": subject, "facts": []},
                    "$max": {"last_question_at": at, "expires_at": at + keep_ms, "expires": expiry(at + keep_ms)},
                },
                upsert=True,
            )
            for tenant, subject, at in asked
        ]
        with mongo_errors():
            await self._facts.bulk_write(updates, ordered=False)


class MongoTraceStore:
    """Run traces in `traces`, `_id` = tenant:run_id (a redelivered run is skipped), with a TTL date."""

    def __init__(self, database: AsyncDatabase[dict[str, Any]], checkpoints: MongoCheckpoints) -> None:
        self._traces = database["traces"]
        self._checkpoints = checkpoints

    async def prepare(self) -> None:
        with mongo_errors():
            # TRACE_DAYS after the run: the TTL monitor deletes it; reads compare `expires_at` themselves
            await self._traces.create_index("expires", expireAfterSeconds=0, name="kept_until")
            await self._traces.create_index([("tenant", ASCENDING), ("started_at", ASCENDING)], name="by_time")
            await self._traces.create_index([("tenant", ASCENDING), ("subject", ASCENDING)], name="by_subject")
            await self._traces.create_index([("tenant", ASCENDING), ("exchange_id", ASCENDING)], name="by_exchange")

    async def applied(self, topic: str, partition: int) -> int:
        return await self._checkpoints.applied(topic, partition)

    async def applied_many(self, topic: str, partitions: Sequence[int]) -> list[int]:
        return await self._checkpoints.applied_many(topic, partitions)

    async def advance(self, position: Position) -> None:
        await self._checkpoints.advance(position)

    async def append(self, docs: list[dict[str, Any]]) -> int:
        return await insert_expiring(self._traces, docs)

    async def get(self, tenant: str, run_id: str, now_ms: int) -> dict[str, Any] | None:
        with mongo_errors():
            doc = await self._traces.find_one(
                {"_id": f"{len(tenant)}:{tenant}:{run_id}", "expires_at": {"$gt": now_ms}}, {"expires": 0}
            )
        return doc

    async def served_threads(self, now_ms: int) -> dict[ThreadKey, Served]:
        query = {"exchange_thread": {"$ne": None}, "expires_at": {"$gt": now_ms}}
        fields = {"_id": 0, "tenant": 1, "exchange_thread": 1, "expires_at": 1}
        fields |= {"run_id": 1, "exchange_id": 1, "call_index": 1, "started_at": 1}
        served: dict[ThreadKey, Served] = {}
        batch: list[dict[str, Any]] = []
        with mongo_errors():
            async for doc in self._traces.find(query, fields, batch_size=1000):
                batch.append(doc)
                if len(batch) >= 1000:
                    served = merge_served(served, served_threads(batch, now_ms))
                    batch.clear()
        return merge_served(served, served_threads(batch, now_ms))

    async def served(self, tenant: str, thread: str, exchange_ids: list[str], now_ms: int) -> list[dict[str, Any]]:
        if not exchange_ids:
            return []
        query = {
            "tenant": tenant,
            "exchange_id": {"$in": sorted(set(exchange_ids))},
            "exchange_thread": thread,
            "expires_at": {"$gt": now_ms},
        }
        fields = {"_id": 0, "run_id": 1, "exchange_id": 1, "call_index": 1, "started_at": 1}
        with mongo_errors():
            return await self._traces.find(query, fields).to_list()

    async def recent(
        self,
        tenant: str,
        now_ms: int,
        *,
        agent: str | None = None,
        status: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 50,
        before: tuple[int, str] | None = None,
    ) -> list[dict[str, Any]]:
        query: dict[str, Any] = {"tenant": tenant, "expires_at": {"$gt": now_ms}}
        if before is not None:
            started, run_id = before
            query["$or"] = [{"started_at": {"$lt": started}}, {"started_at": started, "run_id": {"$lt": run_id}}]
        if agent is not None:
            query["agent"] = agent
        if status is not None:
            query["status"] = status
        if since is not None or until is not None:
            query["started_at"] = {
                **({"$gte": since} if since is not None else {}),
                **({"$lt": until} if until is not None else {}),
            }
        with mongo_errors():
            order = [("started_at", DESCENDING), ("run_id", DESCENDING)]
            cursor = self._traces.find(query, {"expires": 0}).sort(order).limit(limit)
            return await cursor.to_list()

    async def erase_subject(self, tenant: str, subject: str) -> int:
        """Erasure's part here: every trace of the subject's runs, at once (seed 000)."""
        with mongo_errors():
            result = await self._traces.delete_many({"tenant": tenant, "subject": subject})
        return int(result.deleted_count)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        with mongo_errors():
            return await self._traces.find({"tenant": tenant, "subject": subject}, {"expires": 0}).to_list()


class MongoFactSlots:
    """Fact reservations in `fact_slots`, one document per subject: a compare-and-set on its
    `version` makes concurrent reservations of the last slot pick one winner, and a TTL date drops
    the document once every reservation in it has lapsed.

    Args:
        database: the namespace's database.
        clock: the time reservations are dated and lapse by.
    """

    ATTEMPTS = 20  # compare-and-set rounds before a write that keeps losing is answered as a conflict

    def __init__(self, database: AsyncDatabase[dict[str, Any]], clock: Clock = utc_now) -> None:
        self._slots = database["fact_slots"]
        self._clock = clock

    async def prepare(self) -> None:
        with mongo_errors():
            await self._slots.create_index("expires", expireAfterSeconds=0, name="kept_until")
            await self._slots.create_index([("tenant", ASCENDING), ("subject", ASCENDING)], name="by_subject")

    async def reserve(self, tenant: str, subject: str, fact_id: str, held: HeldFacts, limit: int) -> bool:
        now = self._clock()
        until = now + dt.timedelta(seconds=FACT_SLOT_SECONDS)
        key = subject_ref(tenant, subject)
        for _ in range(self.ATTEMPTS):
            with mongo_errors():
                doc = await self._slots.find_one({"_id": key})
            applied = set(await held())  # after the reservations: see HeldFacts
            pending = {
                fid: at for fid, at in (doc or {}).get("pending", {}).items() if fid not in applied and _aware(at) > now
            }
            if len(applied) + len(pending) >= limit:
                return False
            pending[fact_id] = until
            fields = {"tenant": tenant, "subject": subject, "pending": pending, "expires": until}
            with mongo_errors():
                if doc is None:
                    try:
                        await self._slots.insert_one({"_id": key, "version": 1, **fields})
                        return True
                    except DuplicateKeyError:
                        continue  # another reservation made the document first
                result = await self._slots.update_one(
                    {"_id": key, "version": doc["version"]}, {"$set": {**fields, "version": doc["version"] + 1}}
                )
            if result.matched_count == 1:
                return True
        raise Conflict(f"the facts of {subject!r} are being saved by many writers at once; retry")

    async def release(self, tenant: str, subject: str, fact_id: str) -> None:
        with mongo_errors():
            await self._slots.update_one(
                {"_id": subject_ref(tenant, subject)}, {"$unset": {f"pending.{fact_id}": ""}, "$inc": {"version": 1}}
            )

    async def erase_subject(self, tenant: str, subject: str) -> int:
        with mongo_errors():
            result = await self._slots.delete_many({"tenant": tenant, "subject": subject})
        return int(result.deleted_count)


def _aware(at: dt.datetime) -> dt.datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)
