"""The NamespacePointer contract, run against every implementation."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Callable

import pytest

from adapters.in_memory import InMemoryNamespacePointer
from adapters.mongo_lease import LEASE_SECONDS, MongoReplayLease
from adapters.mongo_privacy import MongoNamespacePointer
from adapters.mongo_store import mongo_client
from config.settings import Settings
from projections.ports import NamespacePointer
from schemas.errors import Conflict

Open = Callable[[str], NamespacePointer]  # the pointer of an app id, over the same stored pointers


class NamespacePointerContract:
    async def test_no_namespace_is_active_before_a_switch(self, open_pointer: Open) -> None:
        assert await open_pointer("memlog").active() is None

    async def test_the_last_switch_holds_for_every_reader(self, open_pointer: Open) -> None:
        pointer = open_pointer("memlog")
        await pointer.switch("live-r1", previous="live", switched_at=dt.datetime.now(dt.UTC), projections=["facts"])
        assert await pointer.active() == "live-r1"
        await pointer.switch("live-r2", previous="live-r1")
        assert await pointer.active() == "live-r2"
        assert await open_pointer("memlog").active() == "live-r2"

    async def test_a_switch_from_a_namespace_is_refused_once_the_pointer_moved(self, open_pointer: Open) -> None:
        """Issue 41: two replays that started from `live` cannot both switch; the second is refused."""
        pointer = open_pointer("memlog")
        await pointer.switch("live-r1", previous="live")
        with pytest.raises(Conflict) as refused:
            await pointer.switch("live-r2", previous="live")
        assert "live-r1" in str(refused.value)
        assert await pointer.active() == "live-r1"

    async def test_apps_point_apart(self, open_pointer: Open) -> None:
        await open_pointer("memlog").switch("live-r1")
        assert await open_pointer("memlog-2").active() is None
        await open_pointer("memlog-2").switch("live-r9")
        assert await open_pointer("memlog").active() == "live-r1"


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
