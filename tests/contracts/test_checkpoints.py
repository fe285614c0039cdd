"""The Checkpoints contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryCheckpoints
from memlog.adapters.mongo_store import MongoCheckpoints, mongo_client
from memlog.config.settings import Settings
from tests.contracts.checkpoints import CheckpointsContract, Open


class TestInMemoryCheckpoints(CheckpointsContract):
    @pytest.fixture
    def open_checkpoints(self) -> Open:
        held: dict[str, InMemoryCheckpoints] = {}
        return lambda projection: held.setdefault(projection, InMemoryCheckpoints())


class TestMongoCheckpoints(CheckpointsContract):
    @pytest.fixture
    async def open_checkpoints(self, settings: Settings) -> AsyncIterator[Open]:
        client = mongo_client(settings.mongo)
        yield lambda projection: MongoCheckpoints(client[settings.mongo_db_name], projection)
        await client.drop_database(settings.mongo_db_name)
        await client.close()
