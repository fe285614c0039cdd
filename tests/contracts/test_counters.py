"""The Counters contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.connections import redis_client
from memlog.adapters.in_memory import InMemoryCounters
from memlog.adapters.redis_store import RedisCounters
from memlog.config.settings import Settings
from tests.contracts.counters import CountersContract, Open


class TestInMemoryCounters(CountersContract):
    @pytest.fixture
    def open_counters(self) -> Open:
        held: dict[str, InMemoryCounters] = {}
        return lambda namespace: held.setdefault(namespace, InMemoryCounters())


class TestRedisCounters(CountersContract):
    @pytest.fixture
    async def open_counters(self, settings: Settings) -> AsyncIterator[Open]:
        client = redis_client(settings)
        yield lambda namespace: RedisCounters(client, f"{settings.redis_prefix}:{namespace}")
        async for key in client.scan_iter(match=f"{settings.redis_prefix}:*"):
            await client.delete(key)
        await client.aclose()


# redis-py's cluster client closes its node connections without waiting for their sockets, which
# Python reports, after the test, as an unclosed stream; nothing leaks while the client is in use.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
class TestRedisClusterCounters(TestRedisCounters):
    """The same contract on a 3-master Redis Cluster (`MEMLOG_REDIS_CLUSTER=true`)."""

    @pytest.fixture
    def settings(self, settings: Settings, redis_cluster: str) -> Settings:
        return settings.model_copy(update={"redis_url": redis_cluster, "redis_cluster": True})
