"""The in-process ReceiptStore (projections.ports), the reference the MongoDB one is tested against."""

from __future__ import annotations

import copy
from typing import Any

from projections.receipts import receipt_link, receipt_view
from projections.session import ThreadKey
from projections.traces import Served, served_threads


class InMemoryReceiptStore:
    def __init__(self) -> None:
        self._receipts: dict[str, dict[str, Any]] = {}

    async def append(self, docs: list[dict[str, Any]]) -> int:
        new = 0
        for doc in docs:
            if doc["_id"] not in self._receipts:
                self._receipts[doc["_id"]] = copy.deepcopy(doc)
                new += 1
        return new

    async def served(self, tenant: str, thread: str, exchange_ids: list[str], now_ms: int) -> list[dict[str, Any]]:
        wanted = set(exchange_ids)
        return [
            receipt_link(doc)
            for doc in self._receipts.values()
            if doc["tenant"] == tenant
            and doc["exchange_thread"] == thread
            and doc["exchange_id"] in wanted
            and doc["expires_at"] > now_ms
        ]

    async def served_threads(self, now_ms: int) -> dict[ThreadKey, Served]:
        return served_threads(self._receipts.values(), now_ms)

    def _of(self, tenant: str, subject: str) -> list[str]:
        return [key for key, doc in self._receipts.items() if doc["tenant"] == tenant and doc["subject"] == subject]

    async def erase_subject(self, tenant: str, subject: str) -> int:
        gone = self._of(tenant, subject)
        for key in gone:
            del self._receipts[key]
        return len(gone)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        docs = [self._receipts[key] for key in self._of(tenant, subject)]
        docs.sort(key=lambda doc: (doc["recorded_at"], doc["partition"], doc["offset"]))
        return [receipt_view(doc) for doc in docs]
