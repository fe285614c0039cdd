"""The worker's consumer group subscribes to memlog's topics and nothing else.

Faust's leader election would subscribe it to a topic of its own (`<group>-__assignor-__leader`) that
memlog never creates: the worker logged it missing at every start, a broker that creates topics on
demand made it, and the group rebalanced once more 30 s later, when the next metadata refresh found it
(a rebalance that fell on a store outage once hid that outage from the gauges). memlog runs nothing on
the leader only, so the worker does without it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from memlog.adapters.connections import kafka_options
from memlog.config.settings import Settings
from memlog.dev.processes import MemlogProcess, start_worker
from streams.topics import ensure_topics
from tests.conftest import unique_settings
from tests.e2e.conftest import LOGS


@pytest.fixture
def worker(stack: Settings) -> Iterator[tuple[Settings, MemlogProcess]]:
    settings = unique_settings(stack)
    asyncio.run(ensure_topics(settings))
    process = start_worker(settings, LOGS)
    yield settings, process
    process.stop()


async def topics_of(settings: Settings) -> set[str]:
    admin = AIOKafkaAdminClient(**kafka_options(settings), request_timeout_ms=15000)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def test_a_worker_asks_the_broker_for_no_topic_memlog_does_not_create(
    worker: tuple[Settings, MemlogProcess],
) -> None:
    settings, process = worker
    # the local broker creates a topic the first time a client asks for its metadata, as many do
    topics = await topics_of(settings)
    mine = {name for name in topics if name.startswith(settings.group_id)}
    assert mine == set(), f"the worker's group made topics of its own: {sorted(mine)}"
    assert "not found in cluster metadata" not in process.output()
    memlog_topics = {name for name in topics if name.startswith(settings.topic_prefix)}
    assert memlog_topics == {*settings.subject_topics, settings.deadletter_topic, settings.topic("ingest")}
