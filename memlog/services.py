"""The composition root: opens the clients, stores and producer a process needs, and closes them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from adapters import connections
from adapters.mongo_archives import MongoConversationArchive, MongoIdempotency
from adapters.mongo_privacy import MongoExports, MongoKeyVault, MongoLedger, NamespacePointer
from adapters.mongo_store import MongoArchiveStore, MongoCheckpoints, MongoFactStore, MongoTraceStore
from adapters.redis_store import RedisCounters, RedisSessionStore
from adapters.wiring import Stores, make_codec, open_privacy, open_stores
from config.settings import Settings
from schemas.codec import Codec
from streams.producer import EventProducer
from streams.sealer import Sealer


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


@asynccontextmanager
async def open_services(settings: Settings, *, producer: bool = False) -> AsyncIterator[Services]:
    codec = make_codec(settings)
    redis = connections.redis_client(settings)
    mongo = connections.mongo(settings)
    shared = open_privacy(settings, mongo)
    services = Services(
        settings=settings,
        codec=codec,
        redis=redis,
        mongo=mongo,
        privacy=shared.database,
        vault=shared.vault,
        ledger=shared.ledger,
        exports=shared.exports,
        sealer=Sealer(shared.vault, settings.key_cache_seconds),
        pointer=shared.pointer,
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
