"""The Ledger contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryLedger
from memlog.adapters.mongo_privacy import MongoLedger
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from projections.ports import Ledger
from tests.contracts.clocks import Clock
from tests.contracts.ledger import MASTER, LedgerContract


class TestInMemoryLedger(LedgerContract):
    @pytest.fixture
    def ledger(self, clock: Clock) -> Ledger:
        return InMemoryLedger(MASTER, clock)


class TestMongoLedger(LedgerContract):
    @pytest.fixture
    async def ledger(self, settings: Settings, clock: Clock) -> AsyncIterator[Ledger]:
        client = mongo_client(settings.mongo)
        store = MongoLedger(client[settings.mongo_db_name], MASTER, clock)
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()
