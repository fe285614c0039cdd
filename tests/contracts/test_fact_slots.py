"""The FactSlots contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryFactSlots
from memlog.adapters.mongo_store import MongoFactSlots, mongo_client
from memlog.config.settings import Settings
from projections.ports import FactSlots
from tests.contracts.clocks import Clock
from tests.contracts.fact_slots import FactSlotsContract


class TestInMemoryFactSlots(FactSlotsContract):
    @pytest.fixture
    def slots(self, clock: Clock) -> FactSlots:
        return InMemoryFactSlots(clock)


class TestMongoFactSlots(FactSlotsContract):
    @pytest.fixture
    async def slots(self, settings: Settings, clock: Clock) -> AsyncIterator[FactSlots]:
        client = mongo_client(settings.mongo)
        store = MongoFactSlots(client[settings.mongo_db_name], clock)
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()
