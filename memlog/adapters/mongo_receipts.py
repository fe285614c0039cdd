"""The MongoDB ReceiptStore (projections.ports): receipts in `receipts`, `_id` = tenant:partition:offset (a
redelivered record is skipped), with a TTL date."""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase

from memlog.adapters.mongo_store import insert_expiring, mongo_errors
from projections.receipts import receipt_link, receipt_view
from projections.session import ThreadKey
from projections.traces import Served, merge_served, served_threads

BATCH = 1000


class MongoReceiptStore:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._receipts = database["receipts"]

    async def prepare(self) -> None:
        with mongo_errors():
            # TRACE_DAYS after the receipt: the TTL monitor deletes it; reads compare `expires_at` themselves
            await self._receipts.create_index("expires", expireAfterSeconds=0, name="kept_until")
            await self._receipts.create_index(
                [("tenant", ASCENDING), ("exchange_thread", ASCENDING), ("exchange_id", ASCENDING)], name="by_exchange"
            )
            await self._receipts.create_index([("tenant", ASCENDING), ("subject", ASCENDING)], name="by_subject")

    async def append(self, docs: list[dict[str, Any]]) -> int:
        return await insert_expiring(self._receipts, docs)

    async def served(self, tenant: str, thread: str, exchange_ids: list[str], now_ms: int) -> list[dict[str, Any]]:
        if not exchange_ids:
            return []
        query = {
            "tenant": tenant,
            "exchange_thread": thread,
            "exchange_id": {"$in": sorted(set(exchange_ids))},
            "expires_at": {"$gt": now_ms},
        }
        with mongo_errors():
            return [receipt_link(doc) for doc in await self._receipts.find(query, {"detail": 0}).to_list()]

    async def served_threads(self, now_ms: int) -> dict[ThreadKey, Served]:
        served: dict[ThreadKey, Served] = {}
        batch: list[dict[str, Any]] = []
        with mongo_errors():
            async for doc in self._receipts.find({"expires_at": {"$gt": now_ms}}, {"detail": 0}, batch_size=BATCH):
                batch.append(doc)
                if len(batch) >= BATCH:
                    served = merge_served(served, served_threads(batch, now_ms))
                    batch.clear()
        return merge_served(served, served_threads(batch, now_ms))

    async def erase_subject(self, tenant: str, subject: str) -> int:
        with mongo_errors():
            result = await self._receipts.delete_many({"tenant": tenant, "subject": subject})
        return int(result.deleted_count)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        order = [("recorded_at", ASCENDING), ("partition", ASCENDING), ("offset", ASCENDING)]
        with mongo_errors():
            docs = await self._receipts.find({"tenant": tenant, "subject": subject}).sort(order).to_list()
        return [receipt_view(doc) for doc in docs]
