"""Storage upkeep for operators: what an erasure deleted is gone from queries at once, but storage
engines keep the bytes on disk until they rewrite their files. `memlog compact` asks them to.

- MongoDB (WiredTiger): `compact` rewrites each collection and its indexes, so freed pages (deleted
  documents, the key vault's deleted data keys) no longer sit in the files. SecantusDB has no
  `compact`: there it takes a checkpoint (`fsync`) and drops its internal oplog's entries past
  their retention (`secantusAdmin.pruneOplog`); WiredTiger reuses the freed pages later.
- Redis: `BGREWRITEAOF` rewrites the append-only file from what the keys hold now (it still holds
  every deleted write otherwise), or `BGSAVE` writes a fresh snapshot when only snapshots are kept.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from pymongo import AsyncMongoClient
from pymongo.errors import OperationFailure
from redis.exceptions import ResponseError

from memlog.adapters.mongo_store import mongo_errors
from memlog.adapters.redis_store import redis_errors

COMMAND_NOT_FOUND = 59  # MongoDB's code for a command the server does not have


async def compact_mongo(client: AsyncMongoClient[dict[str, Any]], databases: list[str]) -> list[str]:
    """Rewrite every collection of `databases`; one line per database says what was done."""
    done: list[str] = []
    existing = set(await client.list_database_names())
    for name in databases:
        if name not in existing:
            continue
        with mongo_errors():
            collections = sorted(await client[name].list_collection_names())
            try:
                for collection in collections:
                    await client[name].command({"compact": collection})
            except OperationFailure as exc:
                if exc.code != COMMAND_NOT_FOUND:
                    raise
                done.append(f"mongodb {name}: no compact on this server; {await _checkpoint(client)}")
                continue
        done.append(f"mongodb {name}: compacted {len(collections)} collections")
    return done


async def _checkpoint(client: AsyncMongoClient[dict[str, Any]]) -> str:
    """SecantusDB: a WiredTiger checkpoint, and its oplog pruned past retention."""
    await client.admin.command({"fsync": 1})
    try:
        pruned = await client.admin.command({"secantusAdmin.pruneOplog": 1})
    except OperationFailure:
        return "checkpoint taken (fsync)"
    return f"checkpoint taken (fsync), {int(pruned.get('pruned', 0))} oplog entries past retention dropped"


async def rewrite_redis(client: aioredis.Redis) -> str:
    """Rewrite the append-only file, or write a fresh snapshot where no append-only file is kept."""
    with redis_errors():
        raw = await client.config_get("appendonly")
        settings = {_text(k): _text(v) for k, v in raw.items()}
        try:
            if settings.get("appendonly") == "yes":
                await client.bgrewriteaof()  # type: ignore[no-untyped-call]
                return "redis: append-only file rewrite started (BGREWRITEAOF)"
            await client.bgsave()
            return "redis: snapshot started (BGSAVE)"
        except ResponseError as exc:
            if "in progress" in str(exc) or "scheduled" in str(exc):
                return f"redis: {exc}"  # one is running already: it writes what the keys hold now too
            raise


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
