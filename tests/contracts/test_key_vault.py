"""The KeyVault contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryKeyVault, WrappedKey
from memlog.adapters.mongo_privacy import MongoKeyVault
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from tests.contracts.key_vault import MASTER, KeyVaultContract, Open


class TestInMemoryKeyVault(KeyVaultContract):
    @pytest.fixture
    def open_vault(self) -> Open:
        held: dict[str, WrappedKey] = {}
        return lambda master: InMemoryKeyVault(master, held)


class TestMongoKeyVault(KeyVaultContract):
    @pytest.fixture
    async def open_vault(self, settings: Settings) -> AsyncIterator[Open]:
        client = mongo_client(settings.mongo)
        database = client[settings.mongo_db_name]
        await MongoKeyVault(database, MASTER).prepare()
        yield lambda master: MongoKeyVault(database, master)
        await client.drop_database(settings.mongo_db_name)
        await client.close()
