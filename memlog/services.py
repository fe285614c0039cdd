"""Opens the clients and stores a process needs, from the settings, and closes them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from memlog.settings import Settings
from projections.mongo_archives import MongoConversationArchive, MongoIdempotency
from projections.mongo_store import (
    MongoArchiveStore,
    MongoCheckpoints,
    MongoFactStore,
    MongoTraceStore,
    mongo_client,
)
from projections.redis_store import RedisCounters, RedisSessionStore
from schemas.catalog import Catalog
from schemas.codec import Codec, SchemaRegistry
from schemas.registry import HttpSchemaRegistry
from streams.producer import EventProducer


@dataclass
class Services:
    settings: Settings
    codec: Codec
    redis: aioredis.Redis
    mongo: AsyncMongoClient[dict[str, Any]]
    database: AsyncDatabase[dict[str, Any]]
    sessions: RedisSessionStore
    counters: RedisCounters
    archive: MongoArchiveStore
    archive_checkpoints: MongoCheckpoints
    facts: MongoFactStore
    fact_activity: MongoCheckpoints
    traces: MongoTraceStore
    conversations: MongoConversationArchive
    idempotency: MongoIdempotency
    _producer: EventProducer | None = None

    @property
    def producer(self) -> EventProducer:
        assert self._producer is not None, "opened without a producer"
        return self._producer


def make_codec(settings: Settings) -> Codec:
    registry: SchemaRegistry | None = None
    if settings.schema_registry_url:
        registry = HttpSchemaRegistry(settings.schema_registry_url)
    return Codec(Catalog(), registry)


@asynccontextmanager
async def open_services(settings: Settings, *, producer: bool = False) -> AsyncIterator[Services]:
    codec = make_codec(settings)
    redis = aioredis.Redis.from_url(settings.redis, socket_timeout=10, socket_connect_timeout=5)
    mongo = mongo_client(settings.mongo)
    database = mongo[settings.mongo_db_name]
    services = Services(
        settings=settings,
        codec=codec,
        redis=redis,
        mongo=mongo,
        database=database,
        sessions=RedisSessionStore(redis, settings.redis_prefix),
        counters=RedisCounters(redis, settings.redis_prefix),
        archive=MongoArchiveStore(database),
        archive_checkpoints=MongoCheckpoints(database, "archive"),
        facts=MongoFactStore(database),
        fact_activity=MongoCheckpoints(database, "facts-activity"),
        traces=MongoTraceStore(database),
        conversations=MongoConversationArchive(database),
        idempotency=MongoIdempotency(database, settings.idempotency_ttl_seconds),
    )
    try:
        if producer:
            services._producer = EventProducer(settings, codec, idempotence=settings.idempotent_producer)
            await services._producer.start()
        yield services
    finally:
        if services._producer is not None:
            await services._producer.stop()
        await redis.aclose()
        await mongo.close()
        codec.close()
