"""Test fixtures. The suite runs against the real local stack (Kafka, Redis, SecantusDB), which it
starts when missing and stops afterwards; a service that cannot start fails the run, never skips it."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import settings as hypothesis_settings

from memlog.config.settings import Settings
from memlog.dev.localstack import LocalStack
from memlog.dev.localstack.cluster import LocalRedisCluster
from memlog.dev.localstack.kafka_cluster import LocalKafkaCluster
from memlog.dev.processes import isolated
from memlog.services import Services, open_services
from projections.tokens import TokenCounter, load_encoding
from streams.topics import ensure_topics
from tests.kafka import delete_topics_under

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    _name_stream_writers()
    # No timing assertions: the machines are shared, and Hypothesis's per-example deadline (200 ms)
    # failed a pure rule's test under load. Examples are still bounded by the per-test timeout.
    hypothesis_settings.register_profile("memlog", deadline=None)
    hypothesis_settings.load_profile("memlog")


def _name_stream_writers() -> None:
    """Give every asyncio StreamWriter's repr the code that opened it.

    A Kafka or Redis connection left open is reported by `StreamWriter.__del__` as an unraisable
    `ResourceWarning`, "unclosed <StreamWriter ...>", whenever the writer happens to be collected: often
    during a later test than the one that leaked it, and with nothing in the message to say whose
    connection it was. With this, the message names the opening call's frames outside asyncio.
    """
    writer = asyncio.StreamWriter
    if getattr(writer, "_memlog_named", False):
        return
    plain_init = writer.__init__
    plain_repr = writer.__repr__

    def init(self: asyncio.StreamWriter, *args: Any, **kwargs: Any) -> None:
        plain_init(self, *args, **kwargs)
        self._memlog_opened_at = _opener()  # type: ignore[attr-defined]

    def named_repr(self: asyncio.StreamWriter) -> str:
        return f"{plain_repr(self)[:-1]} opened at {getattr(self, '_memlog_opened_at', 'an unknown place')}>"

    writer.__init__ = init  # type: ignore[method-assign]
    writer.__repr__ = named_repr  # type: ignore[method-assign,assignment]
    writer._memlog_named = True  # type: ignore[attr-defined]


def _opener(depth: int = 8) -> str:
    """The innermost `depth` frames of the caller's stack outside asyncio, innermost first."""
    frame = sys._getframe(2)
    places: list[str] = []
    while frame is not None and len(places) < depth:
        code = frame.f_code
        if f"{os.sep}asyncio{os.sep}" not in code.co_filename:
            places.append(f"{Path(code.co_filename).name}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back  # type: ignore[assignment]
    return " <- ".join(places)


def base_settings(**overrides: Any) -> Settings:
    home = Path(os.environ.get("MEMLOG_HOME", ROOT / ".memlog-test"))
    # keyword recall unless a test (or MEMLOG_EMBEDDINGS) asks for a model: the suites assert BM25's
    # rankings, and the embedding paths have tests of their own (unit/test_embeddings, e2e/test_facts)
    pinned = {} if "MEMLOG_EMBEDDINGS" in os.environ else {"embeddings": "none"}
    return Settings(home=home, **{**pinned, **overrides})


@pytest.fixture(scope="session")
def local_stack() -> Iterator[LocalStack]:
    """The local services; fault tests stop and start them one at a time through it."""
    local = LocalStack(base_settings())
    local.up()
    try:
        yield local
    finally:
        # what this session started, including a service a fault test started again
        local.down([service.name for service in local.services if service.started_here])


# the topic prefixes of the namespaces this session made: their topics are deleted when the session ends, so
# a long-lived developer stack does not pile up partition directories (one broker died of open files at ~20,000)
_MADE_PREFIXES: set[str] = set()


@pytest.fixture(scope="session")
def stack(local_stack: LocalStack) -> Iterator[Settings]:
    settings = base_settings()
    yield settings
    asyncio.run(delete_topics_under(settings, sorted(_MADE_PREFIXES)))


def unique_settings(stack: Settings, **overrides: Any) -> Settings:
    """Settings with topics, consumer group and store namespaces of their own (one per test); the session
    deletes the namespace's topics at its end."""
    made = isolated(stack, **overrides)
    _MADE_PREFIXES.add(made.topic_prefix)
    return made


@pytest.fixture
def settings(stack: Settings) -> Settings:
    return unique_settings(stack)


@pytest.fixture
async def topics(settings: Settings) -> Settings:
    await ensure_topics(settings)
    return settings


@pytest.fixture
async def services(topics: Settings) -> AsyncIterator[Services]:
    async with open_services(topics, producer=True) as opened:
        yield opened
        await opened.mongo.drop_database(topics.mongo_db_name)
        await _drop_prefix(opened.redis, topics.redis_prefix)


async def _drop_prefix(client: aioredis.Redis, prefix: str) -> None:
    async for key in client.scan_iter(match=f"{prefix}:*", count=500):
        await client.delete(key)


@pytest.fixture(scope="session")
def count_tokens() -> TokenCounter:
    return TokenCounter(load_encoding("cl100k_base"))


@pytest.fixture(scope="session")
def redis_cluster(stack: Settings) -> Iterator[str]:
    """A local 3-master Redis Cluster (memlog.dev.localstack.cluster), started if missing; its URL."""
    cluster = LocalRedisCluster(stack)
    started = cluster.up()
    yield cluster.url
    cluster.down(started)


@pytest.fixture(scope="session")
def kafka_cluster(stack: Settings) -> Iterator[LocalKafkaCluster]:
    """A 3-node KRaft cluster (memlog.dev.localstack.kafka_cluster), started if missing; stopped if started here."""
    cluster = LocalKafkaCluster(stack)
    started = cluster.up()
    yield cluster
    cluster.down([node.name for node in cluster.nodes if node.name in started or node.started_here])
