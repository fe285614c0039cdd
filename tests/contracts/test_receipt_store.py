"""The ReceiptStore contract (seed 004's receipts), run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from memlog.adapters.in_memory import InMemoryReceiptStore
from memlog.adapters.mongo_receipts import MongoReceiptStore
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from projections.evidence import latest_receipts
from projections.position import Position
from projections.receipts import DAY_MS, ReceiptStore, receipt_document
from projections.redaction import Redactor
from projections.session import ThreadKey
from projections.traces import served_links
from schemas.events import Envelope, ReceiptRecorded, now_ms

KEEP_DAYS = 7
# Receipts are recorded now, so a server's TTL monitor never deletes one while a test runs; reads take the time.
NOW = now_ms()


def receipt(
    offset: int,
    *,
    exchange: tuple[str, int | None] = ("x1", 0),
    result: str = "passed",
    subject: str | None = "ann",
    tenant: str = "castle",
    thread: str = "session",
    at: int = NOW,
    partition: int = 0,
) -> dict[str, Any]:
    env = Envelope(tenant=tenant, subject=subject, agent="allay", thread=thread, producer="test", occurred_at=at)
    event = ReceiptRecorded(env, f"rc-{offset}", exchange[0], exchange[1], result, f"checked {offset}")
    return receipt_document(event, Position("traces", partition, offset), Redactor.build(), KEEP_DAYS)


class ReceiptStoreContract:
    async def test_a_record_stored_already_is_skipped(self, receipts: ReceiptStore) -> None:
        assert await receipts.append([receipt(1), receipt(2)]) == 2
        assert await receipts.append([receipt(2), receipt(3)]) == 1  # a redelivered batch: only the new one
        assert await receipts.append([]) == 0
        assert [r["receipt_id"] for r in await receipts.export_subject("castle", "ann")] == ["rc-1", "rc-2", "rc-3"]

    async def test_the_same_offset_on_another_partition_is_another_receipt(self, receipts: ReceiptStore) -> None:
        assert await receipts.append([receipt(1, partition=0), receipt(1, partition=1)]) == 2

    async def test_reads_find_the_receipts_of_the_exchanges_asked_in_their_thread(self, receipts: ReceiptStore) -> None:
        await receipts.append(
            [
                receipt(1, exchange=("x1", 0), result="failed"),
                receipt(2, exchange=("x1", 0), result="passed"),
                receipt(3, exchange=("x1", None), result="failed_expected"),
                receipt(4, exchange=("x2", 0)),
                receipt(5, exchange=("x1", 1), subject="bob"),  # bob's session: another thread
                receipt(6, exchange=("x1", 1), tenant="other"),
            ]
        )
        links = await receipts.served("castle", "session:ann", ["x1"], NOW)
        assert latest_receipts(links) == {("x1", 0): "passed", ("x1", None): "failed_expected"}
        assert await receipts.served("castle", "session:ann", [], NOW) == []
        assert await receipts.served("castle", "session:ann", ["x9"], NOW) == []

    async def test_an_expired_receipt_is_not_read(self, receipts: ReceiptStore) -> None:
        await receipts.append([receipt(1, at=NOW - KEEP_DAYS * DAY_MS - 1), receipt(2, exchange=("x2", 0))])
        assert await receipts.served("castle", "session:ann", ["x1", "x2"], NOW) == [
            {
                "exchange_id": "x2",
                "call_index": 0,
                "receipt": "passed",
                "recorded_at": NOW,
                "offset": 2,
                "expires_at": NOW + KEEP_DAYS * DAY_MS,
            }
        ]
        assert set(await receipts.served_threads(NOW)) == {ThreadKey.session("castle", "ann")}

    async def test_the_served_threads_hold_every_unexpired_receipts_link(self, receipts: ReceiptStore) -> None:
        await receipts.append([receipt(1), receipt(2, subject=None, thread="automation"), receipt(3, subject="bob")])
        served = await receipts.served_threads(NOW)
        assert set(served) == {
            ThreadKey.session("castle", "ann"),
            ThreadKey.session("castle", "bob"),
            ThreadKey.automation("castle", "allay"),
        }
        (link,) = served_links(served[ThreadKey.session("castle", "ann")].links, NOW)
        assert (link["exchange_id"], link["receipt"], link["offset"]) == ("x1", "passed", 1)

    async def test_erasure_and_export_reach_the_subjects_receipts_alone(self, receipts: ReceiptStore) -> None:
        await receipts.append([receipt(1), receipt(2), receipt(3, subject="bob")])
        exported = await receipts.export_subject("castle", "ann")
        assert [(r["receipt_id"], r["detail"], r["exchange_thread"]) for r in exported] == [
            ("rc-1", "checked 1", "session:ann"),
            ("rc-2", "checked 2", "session:ann"),
        ]
        assert await receipts.erase_subject("castle", "ann") == 2
        assert await receipts.export_subject("castle", "ann") == []
        assert await receipts.served("castle", "session:ann", ["x1"], NOW) == []
        assert len(await receipts.export_subject("castle", "bob")) == 1


class TestInMemoryReceiptStore(ReceiptStoreContract):
    @pytest.fixture
    def receipts(self) -> ReceiptStore:
        return InMemoryReceiptStore()


class TestMongoReceiptStore(ReceiptStoreContract):
    @pytest.fixture
    async def receipts(self, settings: Settings) -> AsyncIterator[ReceiptStore]:
        client = mongo_client(settings.mongo)
        store = MongoReceiptStore(client[settings.mongo_db_name])
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()
