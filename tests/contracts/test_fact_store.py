"""The FactStore contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryFactStore
from memlog.adapters.mongo_store import MongoCheckpoints, MongoFactStore, mongo_client
from memlog.config.settings import Settings
from projections.ports import FactStore
from tests.contracts.fact_store import FactStoreContract


class TestInMemoryFactStore(FactStoreContract):
    @pytest.fixture
    def store(self) -> FactStore:
        return InMemoryFactStore()


class TestMongoFactStore(FactStoreContract):
    @pytest.fixture
    async def store(self, settings: Settings) -> AsyncIterator[FactStore]:
        client = mongo_client(settings.mongo)
        database = client[settings.mongo_db_name]
        store = MongoFactStore(database, MongoCheckpoints(database, "facts"))
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()
