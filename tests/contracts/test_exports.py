"""The Exports contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryExports
from memlog.adapters.mongo_privacy import PART_BYTES, MongoExports
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from projections.ports import Exports
from tests.contracts.exports import PART, ExportsContract, chunks, read


class TestInMemoryExports(ExportsContract):
    @pytest.fixture
    def exports(self) -> Exports:
        return InMemoryExports(part_bytes=PART)


class TestMongoExports(ExportsContract):
    @pytest.fixture
    async def exports(self, settings: Settings) -> AsyncIterator[Exports]:
        client = mongo_client(settings.mongo)
        store = MongoExports(client[settings.mongo_db_name], part_bytes=PART)
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()

    async def test_a_bundle_past_mongodbs_16_mib_limit_is_stored_and_read_in_parts(self, settings: Settings) -> None:
        client = mongo_client(settings.mongo)
        database = client[settings.mongo_db_name]
        try:
            store = MongoExports(database)
            await store.prepare()
            body = b"x" * (17 * 1024 * 1024 + 5)
            assert await store.put("heavy", "castle", "ann", chunks(body[: 9 << 20], body[9 << 20 :])) == len(body)
            sizes = [len(doc["data"]) async for doc in database["export_parts"].find({"request_id": "heavy"})]
            assert len(sizes) == 5 and max(sizes) == PART_BYTES
            assert await read(store, "heavy") == body
            assert await store.erase_subject("castle", "ann") == 1
            assert await database["export_parts"].count_documents({}) == 0
        finally:
            await client.drop_database(settings.mongo_db_name)
            await client.close()

    async def test_a_bundle_whose_parts_were_not_all_written_is_not_there_and_is_erased(
        self, exports: Exports, settings: Settings
    ) -> None:
        async def cut_short() -> AsyncIterator[bytes]:
            yield b"a" * (3 * PART)
            raise OSError("the worker died while the bundle was written")

        with pytest.raises(OSError):
            await exports.put("r1", "castle", "ann", cut_short())
        assert await exports.get("r1") is None and await read(exports, "r1") == b""
        assert await exports.erase_subject("castle", "ann") == 1
        client = mongo_client(settings.mongo)
        try:
            assert await client[settings.mongo_db_name]["export_parts"].count_documents({}) == 0
        finally:
            await client.close()
