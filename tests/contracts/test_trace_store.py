"""The TraceStore contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryTraceStore
from memlog.adapters.mongo_store import MongoCheckpoints, MongoTraceStore, mongo_client
from memlog.config.settings import Settings
from projections.ports import TraceStore
from tests.contracts.trace_store import TraceStoreContract


class TestInMemoryTraceStore(TraceStoreContract):
    @pytest.fixture
    def traces(self) -> TraceStore:
        return InMemoryTraceStore()


class TestMongoTraceStore(TraceStoreContract):
    @pytest.fixture
    async def traces(self, settings: Settings) -> AsyncIterator[TraceStore]:
        client = mongo_client(settings.mongo)
        database = client[settings.mongo_db_name]
        store = MongoTraceStore(database, MongoCheckpoints(database, "traces"))
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()
