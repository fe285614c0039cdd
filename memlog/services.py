"""Opens the clients and stores a process needs, from the settings, and closes them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from memlog import connections
from memlog.settings import Settings
from projections.mongo_archives import MongoConversationArchive, MongoIdempotency
from projections.mongo_store import (
    MongoArchiveStore,
    MongoCheckpoints,
    MongoFactStore,
    MongoTraceStore,
    mongo_errors,
)
from projections.privacy_store import MongoExports, MongoKeyVault, MongoLedger
from projections.redis_store import RedisCounters, RedisSessionStore
from schemas.catalog import Catalog
from schemas.codec import Codec, SchemaRegistry
from schemas.registry import HttpSchemaRegistry
from streams.producer import EventProducer
from streams.sealer import Sealer


@dataclass(frozen=True)
class Stores:
    """The projection stores of one namespace (a Redis key prefix and a MongoDB database)."""

    namespace: str
    database: AsyncDatabase[dict[str, Any]]
    sessions: RedisSessionStore
    counters: RedisCounters
    archive: MongoArchiveStore
    archive_checkpoints: MongoCheckpoints
    facts: MongoFactStore
    fact_activity: MongoCheckpoints
    traces: MongoTraceStore
    privacy: MongoCheckpoints  # the privacy agent's applied offsets
    conversations: MongoConversationArchive
    idempotency: MongoIdempotency


def open_stores(
    settings: Settings, redis: aioredis.Redis, mongo: AsyncMongoClient[dict[str, Any]], namespace: str
) -> Stores:
    scoped = settings.model_copy(update={"namespace": namespace})
    database = mongo[scoped.mongo_db_name]
    return Stores(
        namespace=namespace,
        database=database,
        sessions=RedisSessionStore(redis, scoped.redis_prefix),
        counters=RedisCounters(redis, scoped.redis_prefix),
        archive=MongoArchiveStore(database),
        archive_checkpoints=MongoCheckpoints(database, "archive"),
        facts=MongoFactStore(database),
        fact_activity=MongoCheckpoints(database, "facts-activity"),
        traces=MongoTraceStore(database),
        privacy=MongoCheckpoints(database, "privacy"),
        conversations=MongoConversationArchive(database),
        idempotency=MongoIdempotency(database, settings.idempotency_ttl_seconds),
    )


class NamespacePointer:
    """Which namespace reads and workers use, per app id; `memlog replay` moves it once a rebuild is done."""

    def __init__(self, privacy: AsyncDatabase[dict[str, Any]], app_id: str) -> None:
        self._namespaces = privacy["namespaces"]
        self._app_id = app_id

    async def active(self) -> str | None:
        with mongo_errors():
            doc = await self._namespaces.find_one({"_id": self._app_id})
        return None if doc is None else str(doc["namespace"])

    async def switch(self, namespace: str, **info: Any) -> None:
        with mongo_errors():
            await self._namespaces.replace_one({"_id": self._app_id}, {"namespace": namespace, **info}, upsert=True)


@dataclass
class Services:
    settings: Settings
    codec: Codec
    redis: aioredis.Redis
    mongo: AsyncMongoClient[dict[str, Any]]
    privacy: AsyncDatabase[dict[str, Any]]
    vault: MongoKeyVault
    ledger: MongoLedger
    exports: MongoExports
    sealer: Sealer
    pointer: NamespacePointer
    current: Stores
    _producer: EventProducer | None = None

    @property
    def producer(self) -> EventProducer:
        assert self._producer is not None, "opened without a producer"
        return self._producer

    # the current namespace's stores
    @property
    def database(self) -> AsyncDatabase[dict[str, Any]]:
        return self.current.database

    @property
    def sessions(self) -> RedisSessionStore:
        return self.current.sessions

    @property
    def counters(self) -> RedisCounters:
        return self.current.counters

    @property
    def archive(self) -> MongoArchiveStore:
        return self.current.archive

    @property
    def archive_checkpoints(self) -> MongoCheckpoints:
        return self.current.archive_checkpoints

    @property
    def facts(self) -> MongoFactStore:
        return self.current.facts

    @property
    def fact_activity(self) -> MongoCheckpoints:
        return self.current.fact_activity

    @property
    def traces(self) -> MongoTraceStore:
        return self.current.traces

    @property
    def conversations(self) -> MongoConversationArchive:
        return self.current.conversations

    @property
    def idempotency(self) -> MongoIdempotency:
        return self.current.idempotency

    def stores(self, namespace: str) -> Stores:
        return open_stores(self.settings, self.redis, self.mongo, namespace)

    async def follow_pointer(self) -> bool:
        """Switch reads to the namespace the pointer names; True when it moved."""
        namespace = await self.pointer.active() or self.settings.namespace
        if namespace == self.current.namespace:
            return False
        self.current = self.stores(namespace)
        return True


def make_codec(settings: Settings) -> Codec:
    registry: SchemaRegistry | None = None
    if settings.schema_registry_url:
        registry = HttpSchemaRegistry(settings.schema_registry_url)
    return Codec(Catalog(), registry)


@asynccontextmanager
async def open_services(settings: Settings, *, producer: bool = False) -> AsyncIterator[Services]:
    master = settings.master_key_bytes()
    codec = make_codec(settings)
    redis = connections.redis_client(settings)
    mongo = connections.mongo(settings)
    privacy = mongo[settings.privacy_database]
    vault = MongoKeyVault(privacy, master)
    services = Services(
        settings=settings,
        codec=codec,
        redis=redis,
        mongo=mongo,
        privacy=privacy,
        vault=vault,
        ledger=MongoLedger(privacy, master),
        exports=MongoExports(privacy),
        sealer=Sealer(vault, settings.key_cache_seconds),
        pointer=NamespacePointer(privacy, settings.app_id),
        current=open_stores(settings, redis, mongo, settings.namespace),
    )
    try:
        if producer:
            services._producer = EventProducer(
                settings, codec, sealer=services.sealer, idempotence=settings.idempotent_producer
            )
            await services._producer.start()
        yield services
    finally:
        if services._producer is not None:
            await services._producer.stop()
        await redis.aclose()
        await mongo.close()
        codec.close()
