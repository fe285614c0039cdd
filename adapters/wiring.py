"""The one place where each store class is built.

A namespace (a Redis key prefix and a MongoDB database) holds the projection stores; the privacy
stores (key vault, ledger, exports, namespace pointer) live in one database that every namespace
shares, so an erasure recorded there holds for rebuilt namespaces too. The API, the CLI, the MCP
server, the worker and replay all open their stores here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from adapters.mongo_archives import MongoConversationArchive, MongoIdempotency
from adapters.mongo_privacy import MongoExports, MongoKeyVault, MongoLedger, MongoNamespacePointer
from adapters.mongo_store import MongoArchiveStore, MongoCheckpoints, MongoFactSlots, MongoFactStore, MongoTraceStore
from adapters.redis_store import RedisCounters, RedisSessionStore
from config.settings import Settings
from projections.ports import (
    ArchiveStore,
    Checkpoints,
    ConversationArchive,
    Counters,
    Exports,
    FactSlots,
    FactStore,
    Idempotency,
    KeyVault,
    Ledger,
    NamespacePointer,
    SessionStore,
    TraceStore,
)
from schemas.catalog import Catalog
from schemas.codec import Codec, SchemaRegistry
from schemas.registry import HttpSchemaRegistry

Prepare = Callable[[], Awaitable[None]]


async def _prepare_all(prepares: tuple[Prepare, ...]) -> None:
    for prepare in prepares:
        await prepare()


@dataclass(frozen=True)
class Stores:
    """The projection stores of one namespace (a Redis key prefix and a MongoDB database), each by its
    port; only this module knows the classes behind them."""

    namespace: str
    database: AsyncDatabase[dict[str, Any]]
    sessions: SessionStore
    counters: Counters
    archive: ArchiveStore
    archive_checkpoints: Checkpoints
    facts: FactStore
    fact_activity: Checkpoints
    traces: TraceStore
    privacy_checkpoints: Checkpoints  # the privacy step's applied offsets
    conversations: ConversationArchive
    idempotency: Idempotency
    fact_slots: FactSlots
    _prepares: tuple[Prepare, ...] = field(default=(), repr=False)

    async def prepare(self) -> None:
        """Create every index the namespace's stores need (idempotent): the worker, replay and the API
        all call it, so a namespace switched to is complete whoever opened it first."""
        await _prepare_all(self._prepares)


def open_stores(
    settings: Settings, redis: aioredis.Redis, mongo: AsyncMongoClient[dict[str, Any]], namespace: str
) -> Stores:
    scoped = settings.model_copy(update={"namespace": namespace})
    database = mongo[scoped.mongo_db_name]
    archive = MongoArchiveStore(database)
    facts = MongoFactStore(database, MongoCheckpoints(database, "facts"))
    traces = MongoTraceStore(database, MongoCheckpoints(database, "traces"))
    conversations = MongoConversationArchive(database)
    idempotency = MongoIdempotency(database, settings.idempotency_ttl_seconds)
    fact_slots = MongoFactSlots(database)
    return Stores(
        namespace=namespace,
        database=database,
        sessions=RedisSessionStore(redis, scoped.redis_prefix),
        counters=RedisCounters(redis, scoped.redis_prefix),
        archive=archive,
        archive_checkpoints=MongoCheckpoints(database, "archive"),
        facts=facts,
        fact_activity=MongoCheckpoints(database, "facts-activity"),
        traces=traces,
        privacy_checkpoints=MongoCheckpoints(database, "privacy"),
        conversations=conversations,
        idempotency=idempotency,
        fact_slots=fact_slots,
        _prepares=(
            archive.prepare,
            conversations.prepare,
            facts.prepare,
            traces.prepare,
            idempotency.prepare,
            fact_slots.prepare,
        ),
    )


@dataclass(frozen=True)
class PrivacyStores:
    """The stores every namespace shares: data keys, the ledger, export bundles, the namespace pointer."""

    database: AsyncDatabase[dict[str, Any]]
    vault: KeyVault
    ledger: Ledger
    exports: Exports
    pointer: NamespacePointer
    _prepares: tuple[Prepare, ...] = field(default=(), repr=False)

    async def prepare(self) -> None:
        await _prepare_all(self._prepares)


def open_privacy(settings: Settings, mongo: AsyncMongoClient[dict[str, Any]]) -> PrivacyStores:
    database = mongo[settings.privacy_database]
    master = settings.master_key_bytes()
    vault = MongoKeyVault(database, master)
    ledger = MongoLedger(database, master)
    exports = MongoExports(database)
    return PrivacyStores(
        database=database,
        vault=vault,
        ledger=ledger,
        exports=exports,
        pointer=MongoNamespacePointer(database, settings.app_id),
        _prepares=(vault.prepare, ledger.prepare, exports.prepare),
    )


def make_codec(settings: Settings) -> Codec:
    registry: SchemaRegistry | None = None
    if settings.schema_registry_url:
        registry = HttpSchemaRegistry(settings.schema_registry_url)
    return Codec(Catalog(), registry)
