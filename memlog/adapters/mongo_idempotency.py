"""Idempotency reservations in MongoDB (any server speaking its wire protocol): one document per key,
reserved by a unique `_id` insert before anything is produced."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from memlog.adapters.mongo_store import mongo_errors
from projections.ports import PENDING_SECONDS, Clock, utc_now
from schemas.events import KEY_SEPARATOR


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
