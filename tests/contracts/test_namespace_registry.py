"""The NamespaceRegistry contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryNamespaceRegistry
from memlog.adapters.mongo_privacy import MongoNamespaceRegistry
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from tests.contracts.clocks import Clock
from tests.contracts.namespace_registry import NamespaceRegistryContract, Open


class TestInMemoryNamespaceRegistry(NamespaceRegistryContract):
    @pytest.fixture
    def open_registry(self, clock: Clock) -> Open:
        held: dict[str, InMemoryNamespaceRegistry] = {}
        return lambda app_id: held.setdefault(app_id, InMemoryNamespaceRegistry(clock))


class TestMongoNamespaceRegistry(NamespaceRegistryContract):
    @pytest.fixture
    async def open_registry(self, settings: Settings, clock: Clock) -> AsyncIterator[Open]:
        client = mongo_client(settings.mongo)
        database = client[settings.mongo_db_name]
        await MongoNamespaceRegistry(database, "memlog").prepare()
        yield lambda app_id: MongoNamespaceRegistry(database, app_id, clock)
        await client.drop_database(settings.mongo_db_name)
        await client.close()
