"""The ReplayRecords contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.in_memory import InMemoryReplayRecords
from adapters.mongo_privacy import MongoReplayRecords
from adapters.mongo_store import mongo_client
from config.settings import Settings
from projections.ports import ReplayRecords


class ReplayRecordsContract:
    async def test_a_record_reads_back_and_is_replaced_whole(self, records: ReplayRecords) -> None:
        assert await records.get("r1") is None
        await records.save("r1", {"replay_id": "r1", "state": "running", "events": 3, "total": None})
        assert await records.get("r1") == {"replay_id": "r1", "state": "running", "events": 3, "total": None}
        await records.save("r1", {"replay_id": "r1", "state": "done", "namespace": "n1"})
        assert await records.get("r1") == {"replay_id": "r1", "state": "done", "namespace": "n1"}

    async def test_running_lists_only_running_records(self, records: ReplayRecords) -> None:
        await records.save("r1", {"replay_id": "r1", "state": "done"})
        await records.save("r2", {"replay_id": "r2", "state": "running", "heartbeat_ms": 5})
        await records.save("r3", {"replay_id": "r3", "state": "failed", "error": "x"})
        assert await records.running() == [{"replay_id": "r2", "state": "running", "heartbeat_ms": 5}]


class TestInMemoryReplayRecords(ReplayRecordsContract):
    @pytest.fixture
    def records(self) -> ReplayRecords:
        return InMemoryReplayRecords()


class TestMongoReplayRecords(ReplayRecordsContract):
    @pytest.fixture
    async def records(self, settings: Settings) -> AsyncIterator[ReplayRecords]:
        client = mongo_client(settings.mongo)
        store = MongoReplayRecords(client[settings.mongo_db_name], "app-a")
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()

    async def test_apps_keep_their_replays_apart(self, settings: Settings, records: ReplayRecords) -> None:
        client = mongo_client(settings.mongo)
        try:
            other = MongoReplayRecords(client[settings.mongo_db_name], "app-b")
            await records.save("r1", {"replay_id": "r1", "state": "running"})
            assert await other.get("r1") is None and await other.running() == []
        finally:
            await client.close()
