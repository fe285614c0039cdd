"""Archives in MongoDB (any server that speaks its wire protocol). Idempotent by the event's log position."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pymongo import ASCENDING, AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, PyMongoError

from memlog.errors import StoreUnavailable
from projections.position import Position
from projections.stores import ArchivedEvent

DUPLICATE_KEY = 11000


@contextmanager
def mongo_errors() -> Iterator[None]:
    """Translate pymongo's exceptions into memlog's at this edge."""
    try:
        yield
    except PyMongoError as exc:
        raise StoreUnavailable(f"mongodb: {exc}") from exc


def mongo_client(url: str, timeout_ms: int = 5000) -> AsyncMongoClient[dict[str, Any]]:
    return AsyncMongoClient(url, serverSelectionTimeoutMS=timeout_ms, connectTimeoutMS=timeout_ms, tz_aware=True)


class MongoArchiveStore:
    """Thread events in the `archive` collection, `_id` = topic:partition:offset.

    Args:
        database: the namespace's database; a replay writes into another one.
    """

    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._events = database["archive"]

    async def prepare(self) -> None:
        with mongo_errors():
            await self._events.create_index(
                [
                    ("tenant", ASCENDING),
                    ("subject", ASCENDING),
                    ("thread", ASCENDING),
                    ("partition", ASCENDING),
                    ("offset", ASCENDING),
                ],
                name="by_thread",
            )

    async def append(self, events: list[ArchivedEvent]) -> int:
        if not events:
            return 0
        docs = [
            {
                "_id": f"{e.position.topic}:{e.position.partition}:{e.position.offset}",
                "topic": e.position.topic,
                "partition": e.position.partition,
                "offset": e.position.offset,
                "tenant": e.tenant,
                "subject": e.subject,
                "thread": e.thread,
                "exchange_id": e.exchange_id,
                "event_type": e.event_type,
                "occurred_at": e.occurred_at,
                "record": e.record,
            }
            for e in events
        ]
        with mongo_errors():
            try:
                result = await self._events.insert_many(docs, ordered=False)
                return len(result.inserted_ids)
            except BulkWriteError as exc:
                errors = exc.details.get("writeErrors", [])
                if any(err.get("code") != DUPLICATE_KEY for err in errors):
                    raise
                return int(exc.details.get("nInserted", len(docs) - len(errors)))

    async def events(self, tenant: str, subject: str, thread: str) -> list[ArchivedEvent]:
        query = {"tenant": tenant, "subject": subject, "thread": thread}
        with mongo_errors():
            docs = await self._events.find(query).sort([("partition", ASCENDING), ("offset", ASCENDING)]).to_list()
        return [
            ArchivedEvent(
                position=Position(d["topic"], d["partition"], d["offset"]),
                tenant=d["tenant"],
                subject=d["subject"],
                thread=d["thread"],
                exchange_id=d["exchange_id"],
                event_type=d["event_type"],
                occurred_at=d["occurred_at"],
                record=d["record"],
            )
            for d in docs
        ]

    async def count(self, tenant: str) -> int:
        with mongo_errors():
            return int(await self._events.count_documents({"tenant": tenant}))


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

    async def advance(self, position: Position) -> None:
        with mongo_errors():
            await self._applied.update_one(
                {"_id": self._id(position.topic, position.partition)},
                {"$max": {"offset": position.offset}},
                upsert=True,
            )
