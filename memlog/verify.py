"""`memlog verify`: compare two namespaces of projections and name every difference.

Redis keys are compared by value under each namespace's prefix (TTLs are not: they count down);
MongoDB collections document by document, by `_id`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from pymongo import AsyncMongoClient

from memlog.adapters.mongo_entries import GROUPS
from memlog.adapters.mongo_store import mongo_errors
from memlog.adapters.redis_store import redis_errors
from memlog.adapters.wiring import Backends

COLLECTIONS = ("archive", GROUPS, "conversations", "facts", "traces", "applied")
MAX_SHOWN = 200


@dataclass(frozen=True)
class Difference:
    where: str  # "redis" or "mongodb:<collection>"
    key: str
    problem: str

    def __str__(self) -> str:
        return f"{self.where} {self.key}: {self.problem}"


READY_KEYS = ("}:r", "}:t", "}:v", "}:m")  # memlog.adapters.redis_store: a thread's ready context, and its meta
SERVED_KEYS = ("}:e", ":served-marks")  # memlog.adapters.redis_store: served marks, and that they are complete


async def _redis_values(client: aioredis.Redis, prefix: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    with redis_errors():
        async for raw in client.scan_iter(match=f"{prefix}:*", count=1000):
            key = raw.decode()
            if key.startswith(f"{prefix}:idem:"):
                continue  # the API's idempotency claims: requests, not a projection of the log
            if key.endswith(READY_KEYS):
                continue  # a thread's ready context: made from its exchanges, kept or made afresh by a read
            if key.endswith(SERVED_KEYS):
                continue  # served marks: a read hint that lasts as long as the runs, which may have expired
            kind = (await client.type(raw)).decode()
            if kind == "hash":
                value: Any = dict(sorted((await client.hgetall(raw)).items()))  # type: ignore[misc]
                if key.endswith("}:h"):
                    value.pop(b"ver", None)  # counts erasures of lines, which a rebuild never saw
            elif kind == "list":
                value = await client.lrange(raw, 0, -1)  # type: ignore[misc]
            elif kind == "string":
                value = await client.get(raw)
            else:
                value = f"<{kind}>"
            values[key[len(prefix) + 1 :]] = value
    return values


async def _mongo_docs(mongo: AsyncMongoClient[dict[str, Any]], database: str, collection: str) -> dict[str, Any]:
    with mongo_errors():
        docs = await mongo[database][collection].find({}).to_list()
    if collection in (GROUPS, "conversations"):
        for doc in docs:
            # an entry's place in its conversation (projections/places.py) and the conversation's count
            # of places: a read hint. An erasure leaves holes in them that a replay does not rebuild,
            # and a hole only sends a neighbour read to the range read.
            doc.pop("n", None)
            for message in (doc.get("m") or {}).values():
                message.pop("n", None)
    # the privacy agent's offsets belong to the live worker: a replay rebuilds projections, not requests
    return {str(doc["_id"]): doc for doc in docs if not str(doc["_id"]).startswith("privacy:")}


def _compare(where: str, left: dict[str, Any], right: dict[str, Any], names: tuple[str, str]) -> list[Difference]:
    out = []
    for key in sorted(set(left) | set(right)):
        if key not in right:
            out.append(Difference(where, key, f"only in {names[0]}"))
        elif key not in left:
            out.append(Difference(where, key, f"only in {names[1]}"))
        elif left[key] != right[key]:
            out.append(Difference(where, key, "differs"))
    return out


async def verify(backends: Backends, left: str, right: str) -> list[Difference]:
    """Every difference between namespaces `left` and `right` (empty: identical), read through the clients
    of `backends` (memlog.services.open_backends; the caller closes them)."""
    settings, redis, mongo = backends.settings, backends.redis, backends.mongo
    a = settings.model_copy(update={"namespace": left})
    b = settings.model_copy(update={"namespace": right})
    diffs = _compare(
        "redis",
        await _redis_values(redis, a.redis_prefix),
        await _redis_values(redis, b.redis_prefix),
        (left, right),
    )
    for collection in COLLECTIONS:
        diffs += _compare(
            f"mongodb:{collection}",
            await _mongo_docs(mongo, a.mongo_db_name, collection),
            await _mongo_docs(mongo, b.mongo_db_name, collection),
            (left, right),
        )
    return diffs
