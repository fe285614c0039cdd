"""The Exports contract, run against every implementation."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from adapters.in_memory import InMemoryExports
from adapters.mongo_privacy import MongoExports
from adapters.mongo_store import mongo_client
from config.settings import Settings
from projections.ports import Exports


class ExportsContract:
    async def test_a_stored_bundle_reads_back(self, exports: Exports) -> None:
        await exports.put("r1", "castle", "ann", '{"facts": ["one"]}')
        stored = await exports.get("r1")
        assert stored is not None
        assert (stored["tenant"], stored["subject"], stored["bundle"]) == ("castle", "ann", '{"facts": ["one"]}')
        assert isinstance(stored["created_at"], dt.datetime) and stored["created_at"].tzinfo is not None
        assert await exports.get("r2") is None

    async def test_a_bundle_put_again_replaces_the_first(self, exports: Exports) -> None:
        await exports.put("r1", "castle", "ann", "first")
        await exports.put("r1", "castle", "ann", "second")
        stored = await exports.get("r1")
        assert stored is not None and stored["bundle"] == "second"

    async def test_erasing_a_subject_deletes_only_their_bundles(self, exports: Exports) -> None:
        for request_id, tenant, subject in [
            ("r1", "castle", "ann"),
            ("r2", "castle", "ann"),
            ("r3", "castle", "bob"),
            ("r4", "castle:2", "ann"),
        ]:
            await exports.put(request_id, tenant, subject, "{}")
        assert await exports.erase_subject("castle", "ann") == 2
        assert [await exports.get(r) is None for r in ["r1", "r2", "r3", "r4"]] == [True, True, False, False]
        assert await exports.erase_subject("castle", "ann") == 0


class TestInMemoryExports(ExportsContract):
    @pytest.fixture
    def exports(self) -> Exports:
        return InMemoryExports()


class TestMongoExports(ExportsContract):
    @pytest.fixture
    async def exports(self, settings: Settings) -> AsyncIterator[Exports]:
        client = mongo_client(settings.mongo)
        store = MongoExports(client[settings.mongo_db_name])
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()
