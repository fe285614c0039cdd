"""The Idempotency contract, run against every implementation. The clock is the test's, so a
reservation's lapse is tested without waiting for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryIdempotency
from memlog.adapters.mongo_idempotency import MongoIdempotency
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from projections.ports import Idempotency
from tests.contracts.clocks import Clock
from tests.contracts.idempotency import ACCEPTED, ANN, TTL_SECONDS, IdempotencyContract


class TestInMemoryIdempotency(IdempotencyContract):
    @pytest.fixture
    def keys(self, clock: Clock) -> Idempotency:
        return InMemoryIdempotency(TTL_SECONDS, clock)

    async def test_a_key_is_forgotten_after_its_ttl(self, keys: Idempotency, clock: Clock) -> None:
        # MongoDB's TTL monitor does this within a minute of the expiry; the suite does not wait for it
        await keys.reserve(*ANN, "ann")
        await keys.complete(*ANN, ACCEPTED)
        clock.move(TTL_SECONDS)
        assert await keys.reserve(*ANN, "ann") is None


class TestMongoIdempotency(IdempotencyContract):
    @pytest.fixture
    async def keys(self, settings: Settings, clock: Clock) -> AsyncIterator[Idempotency]:
        client = mongo_client(settings.mongo)
        store = MongoIdempotency(client[settings.mongo_db_name], TTL_SECONDS, clock)
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()
