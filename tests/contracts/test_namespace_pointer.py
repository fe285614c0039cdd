"""The NamespacePointer contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryNamespacePointer
from memlog.adapters.mongo_lease import LEASE_SECONDS, MongoReplayLease
from memlog.adapters.mongo_privacy import MongoNamespacePointer
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from schemas.errors import Conflict
from tests.contracts.namespace_pointer import NamespacePointerContract, Open


class TestInMemoryNamespacePointer(NamespacePointerContract):
    @pytest.fixture
    def open_pointer(self) -> Open:
        held: dict[str, InMemoryNamespacePointer] = {}
        return lambda app_id: held.setdefault(app_id, InMemoryNamespacePointer())


class TestMongoNamespacePointer(NamespacePointerContract):
    @pytest.fixture
    async def open_pointer(self, settings: Settings) -> AsyncIterator[Open]:
        client = mongo_client(settings.mongo)
        yield lambda app_id: MongoNamespacePointer(client[settings.mongo_db_name], app_id)
        await client.drop_database(settings.mongo_db_name)
        await client.close()


async def test_one_replay_lease_at_a_time(settings: Settings) -> None:
    """Issue 41: the lease the API's and the CLI's replays take; a holder renews it, another is refused
    until it is released or expires."""
    client = mongo_client(settings.mongo)
    now = [1_000_000]
    try:
        lease = MongoReplayLease(client[settings.mongo_db_name], "memlog", clock=lambda: now[0])
        await lease.take("api:1", "replay by the API")
        await lease.take("api:1")  # its holder renews it
        with pytest.raises(Conflict) as refused:
            await lease.take("cli:2")
        assert "replay by the API" in str(refused.value)
        await MongoReplayLease(client[settings.mongo_db_name], "memlog-2").take("cli:3")  # another app's own
        await lease.release("api:1")
        await lease.take("cli:2")
        assert await lease.holder() == "cli:2"
        now[0] += int(LEASE_SECONDS * 1000) + 1  # a holder that died: its lease expires
        assert await lease.holder() is None
        await lease.take("api:4")
        assert await lease.holder() == "api:4"
    finally:
        await client.drop_database(settings.mongo_db_name)
        await client.close()
