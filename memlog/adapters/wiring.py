"""The one place where each store class is built.

A namespace (a Redis key prefix and a MongoDB database) holds the projection stores; the privacy
stores (key vault, ledger, exports, namespace pointer and registry) live in one database that every
namespace shares, so an erasure recorded there holds for rebuilt namespaces too. The API, the CLI, the MCP
server, the worker and replay all open their stores here, over the clients of one `Backends`, which the
composition root opens (memlog.services.open_backends, the one bootstrap) and hands down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from memlog.adapters.archive_vectors import make_archive_vectors
from memlog.adapters.mongo_archives import MongoConversationArchive
from memlog.adapters.mongo_idempotency import MongoIdempotency
from memlog.adapters.mongo_lease import MongoReplayLease
from memlog.adapters.mongo_privacy import (
    MongoExports,
    MongoKeyVault,
    MongoLedger,
    MongoNamespacePointer,
    MongoNamespaceRegistry,
    MongoReplayRecords,
)
from memlog.adapters.mongo_receipts import MongoReceiptStore
from memlog.adapters.mongo_search import MongoArchiveSearch
from memlog.adapters.mongo_store import (
    MongoCheckpoints,
    MongoFactSlots,
    MongoFactStore,
    MongoTraceStore,
    mongo_errors,
)
from memlog.adapters.redis_store import RedisCounters, RedisSessionStore, redis_errors
from memlog.config.settings import Settings
from projections.namespaces import valid_name
from projections.ports import (
    Exports,
    KeyVault,
    Ledger,
    NamespacePointer,
    NamespaceRegistry,
    ReplayRecords,
    SessionStore,
    TraceStore,
)
from projections.receipts import ReceiptStore
from projections.stores import Prepare, Stores, prepare_all
from projections.traces import merge_served
from schemas.catalog import Catalog
from schemas.codec import Codec, SchemaRegistry
from schemas.errors import StoreRefused
from schemas.events import now_ms
from schemas.registry import HttpSchemaRegistry


async def mark_served_threads(traces: TraceStore, sessions: SessionStore, receipts: ReceiptStore) -> None:
    """Complete a namespace's served marks (`ServedMarks`) where they are not: runs stored before there
    were marks, or marks a Redis lost with the rest of its keys. Every unexpired run's thread is marked,
    then the marks are recorded complete; from then on the trace projection marks each run it stores.
    Idempotent, and done once: later calls read one key."""
    if await sessions.served_marks_complete():
        return
    now = now_ms()
    await sessions.mark_served(merge_served(await traces.served_threads(now), await receipts.served_threads(now)))
    await sessions.complete_served_marks()


def open_stores(
    settings: Settings, redis: aioredis.Redis, mongo: AsyncMongoClient[dict[str, Any]], namespace: str
) -> Stores:
    scoped = settings.model_copy(update={"namespace": namespace})
    database = mongo[scoped.mongo_db_name]
    facts = MongoFactStore(database, MongoCheckpoints(database, "facts"))
    traces = MongoTraceStore(database, MongoCheckpoints(database, "traces"))
    receipts = MongoReceiptStore(database)
    conversations = MongoConversationArchive(
        database, search_time_ms=settings.search_max_time_ms, vectors=make_archive_vectors(settings)
    )
    archive_search = MongoArchiveSearch(database, search_time_ms=settings.search_max_time_ms)
    idempotency = MongoIdempotency(database, settings.idempotency_ttl_seconds)
    fact_slots = MongoFactSlots(database)

    async def drop() -> None:
        if not valid_name(namespace):
            raise StoreRefused(f"{namespace!r} is not a namespace name: its keys could not be told from others'")
        if scoped.mongo_db_name == settings.privacy_database:
            raise StoreRefused(f"namespace {namespace} would be the privacy database {settings.privacy_database}")
        with mongo_errors():
            await mongo.drop_database(scoped.mongo_db_name)
        # The prefix ends in ':' and neither the app id nor the namespace holds ':' or a glob character
        # (memlog.config.settings), so this matches the namespace's keys and no other's.
        with redis_errors():
            batch: list[Any] = []
            async for key in redis.scan_iter(match=f"{scoped.redis_prefix}:*", count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    await redis.delete(*batch)
                    batch.clear()
            if batch:
                await redis.delete(*batch)

    sessions = RedisSessionStore(redis, scoped.redis_prefix)

    async def mark_served() -> None:
        await mark_served_threads(traces, sessions, receipts)

    return Stores(
        namespace=namespace,
        database=database,
        sessions=sessions,
        counters=RedisCounters(redis, scoped.redis_prefix),
        archive_checkpoints=MongoCheckpoints(database, "archive"),
        facts=facts,
        fact_activity=MongoCheckpoints(database, "facts-activity"),
        traces=traces,
        receipts=receipts,
        privacy_checkpoints=MongoCheckpoints(database, "privacy"),
        conversations=conversations,
        idempotency=idempotency,
        fact_slots=fact_slots,
        archive_search=archive_search,
        similar=conversations if settings.search_vectors != "none" else None,
        _prepares=(
            conversations.prepare,
            archive_search.prepare,
            facts.prepare,
            traces.prepare,
            receipts.prepare,
            mark_served,  # after the traces' indexes, before anyone reads a context
            idempotency.prepare,
            fact_slots.prepare,
        ),
        _drop=drop,
    )


@dataclass(frozen=True)
class PrivacyStores:
    """The stores every namespace shares: data keys, the ledger, export bundles, the namespace pointer
    and the registry of namespaces."""

    database: AsyncDatabase[dict[str, Any]]
    vault: KeyVault
    ledger: Ledger
    exports: Exports
    pointer: NamespacePointer
    namespaces: NamespaceRegistry
    replays: ReplayRecords
    lease: MongoReplayLease
    _prepares: tuple[Prepare, ...] = field(default=(), repr=False)

    async def prepare(self) -> None:
        await prepare_all(self._prepares)


def open_privacy(settings: Settings, mongo: AsyncMongoClient[dict[str, Any]]) -> PrivacyStores:
    database = mongo[settings.privacy_database]
    master = settings.master_key_bytes()
    vault = MongoKeyVault(database, master, settings.key_periods())
    ledger = MongoLedger(database, master, keep_seconds=round(settings.ledger_days * 86_400))
    exports = MongoExports(database, keep_seconds=settings.export_keep_seconds)
    namespaces = MongoNamespaceRegistry(database, settings.app_id)
    replays = MongoReplayRecords(database, settings.app_id)
    return PrivacyStores(
        database=database,
        vault=vault,
        ledger=ledger,
        exports=exports,
        pointer=MongoNamespacePointer(database, settings.app_id),
        namespaces=namespaces,
        replays=replays,
        lease=MongoReplayLease(database, settings.app_id),
        _prepares=(vault.prepare, ledger.prepare, exports.prepare, namespaces.prepare, replays.prepare),
    )


@dataclass
class Backends:
    """One process's clients of the stores (Redis, MongoDB), its codec, and the stores every namespace
    shares; a namespace's stores are opened over the same clients (`stores`). Opened by the composition
    root only (memlog.services.open_backends); the worker receives it, a rebuild receives `OpenBackends`
    to open its own (replay runs rebuilds in processes of their own). `close` closes the clients."""

    settings: Settings
    codec: Codec
    redis: aioredis.Redis
    mongo: AsyncMongoClient[dict[str, Any]]
    shared: PrivacyStores

    def stores(self, namespace: str) -> Stores:
        return open_stores(self.settings, self.redis, self.mongo, namespace)

    async def close(self) -> None:
        await self.redis.aclose()
        await self.mongo.close()
        self.codec.close()


# what a process given the root's opener calls for clients of its own (a module-level function: it goes
# to a replay's processes by name)
OpenBackends = Callable[[Settings], Backends]


async def database_names(mongo: AsyncMongoClient[dict[str, Any]]) -> list[str]:
    """Every database on the server (to find namespaces made before the namespace registry)."""
    with mongo_errors():
        return list(await mongo.list_database_names())


def make_codec(settings: Settings) -> Codec:
    registry: SchemaRegistry | None = None
    if settings.schema_registry_url:
        registry = HttpSchemaRegistry(settings.schema_registry_url)
    return Codec(Catalog(), registry)
