"""The NamespacePointer contract, run against every implementation."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Callable

import pytest

from adapters.in_memory import InMemoryNamespacePointer
from adapters.mongo_privacy import MongoNamespacePointer
from adapters.mongo_store import mongo_client
from config.settings import Settings
from projections.ports import NamespacePointer

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
