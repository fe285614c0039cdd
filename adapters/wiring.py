"""The one place where each store class is built.

A namespace (a Redis key prefix and a MongoDB database) holds the projection stores; the privacy
stores (key vault, ledger, exports, namespace pointer) live in one database that every namespace
shares, so an erasure recorded there holds for rebuilt namespaces too. The API, the CLI, the MCP
server, the worker and replay all open their stores here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from adapters.mongo_archives import MongoConversationArchive, MongoIdempotency
from adapters.mongo_privacy import MongoExports, MongoKeyVault, MongoLedger, MongoNamespacePointer
from adapters.mongo_store import MongoArchiveStore, MongoCheckpoints, MongoFactStore, MongoTraceStore
from adapters.redis_store import RedisCounters, RedisSessionStore
from config.settings import Settings
from schemas.catalog import Catalog
from schemas.codec import Codec, SchemaRegistry
from schemas.registry import HttpSchemaRegistry


@dataclass(frozen=True)
class Stores:
    """The projection stores of one namespace (a Redis key prefix and a MongoDB database).

    The fields name the concrete classes, as `PrivacyStores` does: the application calls what only
    they have (`prepare`, the search query the benchmark times). Everything below it, in streams/,
    takes each store by its port in projections.ports.
    """

    namespace: str
    database: AsyncDatabase[dict[str, Any]]
    sessions: RedisSessionStore
    counters: RedisCounters
    archive: MongoArchiveStore
    archive_checkpoints: MongoCheckpoints
    facts: MongoFactStore
    fact_activity: MongoCheckpoints
    traces: MongoTraceStore
    privacy_checkpoints: MongoCheckpoints  # the privacy step's applied offsets
    conversations: MongoConversationArchive
    idempotency: MongoIdempotency

    async def prepare(self) -> None:
        """Create the indexes the projections write through (idempotent)."""
        await self.archive.prepare()
        await self.conversations.prepare()
        await self.facts.prepare()
        await self.traces.prepare()


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
        privacy_checkpoints=MongoCheckpoints(database, "privacy"),
        conversations=MongoConversationArchive(database),
        idempotency=MongoIdempotency(database, settings.idempotency_ttl_seconds),
    )


@dataclass(frozen=True)
class PrivacyStores:
    """The stores every namespace shares: data keys, the ledger, export bundles, the namespace pointer."""

    database: AsyncDatabase[dict[str, Any]]
    vault: MongoKeyVault
    ledger: MongoLedger
    exports: MongoExports
    pointer: MongoNamespacePointer

    async def prepare(self) -> None:
        await self.vault.prepare()
        await self.ledger.prepare()
        await self.exports.prepare()


def open_privacy(settings: Settings, mongo: AsyncMongoClient[dict[str, Any]]) -> PrivacyStores:
    database = mongo[settings.privacy_database]
    master = settings.master_key_bytes()
    return PrivacyStores(
        database=database,
        vault=MongoKeyVault(database, master),
        ledger=MongoLedger(database, master),
        exports=MongoExports(database),
        pointer=MongoNamespacePointer(database, settings.app_id),
    )


def make_codec(settings: Settings) -> Codec:
    registry: SchemaRegistry | None = None
    if settings.schema_registry_url:
        registry = HttpSchemaRegistry(settings.schema_registry_url)
    return Codec(Catalog(), registry)
