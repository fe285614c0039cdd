"""The ReplayRecords contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryReplayRecords
from memlog.adapters.mongo_privacy import MongoReplayRecords
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from projections.ports import ReplayRecords
from tests.contracts.replay_records import ReplayRecordsContract


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
