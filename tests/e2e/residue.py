"""Scans of every topic, key and document for values that must be gone: what the residue tests look through."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from memlog.services import open_services
from projections.sealing import SealError, open_sealed
from schemas.errors import DecodeError


@dataclass
class Scan:
    """What a scan read, and where each value it looked for was found."""

    records: int = 0
    keys: int = 0
    documents: int = 0
    found: dict[str, set[str]] = field(default_factory=dict)

    def look(self, where: str, text: str, values: list[str]) -> None:
        for value in values:
            if value in text:
                self.found.setdefault(value, set()).add(where)


async def scan_kafka(settings: Settings, values: list[str], scan: Scan) -> None:
    """Every record of every topic of this app, as bytes, and opened where its data key still exists."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        topics = sorted(t for t in await admin.list_topics() if settings.topic_prefix in t or settings.app_id in t)
        described = await admin.describe_topics(topics)
    finally:
        await admin.close()
    assert settings.threads_topic in topics and settings.deadletter_topic in topics
    partitions = [TopicPartition(d["topic"], p["partition"]) for d in described for p in d["partitions"]]
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        left = {tp for tp in partitions if ends[tp] > 0}
        async with open_services(settings) as services:
            while left:
                for tp, records in (await consumer.getmany(*left, timeout_ms=1000)).items():
                    for record in records:
                        scan.records += 1
                        raw = (record.key or b"") + b"\x00" + (record.value or b"")
                        scan.look(f"kafka {tp.topic} (bytes)", raw.decode("utf-8", "replace"), values)
                        opened = await _opened(services, record.value)
                        if opened is not None:
                            scan.look(f"kafka {tp.topic} (opened)", opened, values)
                left = {tp for tp in left if await consumer.position(tp) < ends[tp]}
    finally:
        await consumer.stop()


async def _opened(services: Any, value: bytes | None) -> str | None:
    """The record decoded, its sealed fields opened with a key that still exists; None if it is no event."""
    try:
        decoded = services.codec.decode(value)
    except DecodeError:
        return None
    box = decoded.record.get("envelope", {}).get("sealed")
    if box is None:
        return json.dumps(decoded.record, default=str)
    keys = await services.vault.keys_by_id([box["key_id"]])
    if box["key_id"] not in keys:
        return None  # shredded: its bytes were searched already
    try:
        return json.dumps(open_sealed(decoded.full_name, decoded.record, keys[box["key_id"]]), default=str)
    except SealError:
        return None


async def scan_redis(settings: Settings, values: list[str], scan: Scan) -> None:
    """Every key under the app's prefix (every namespace), its name and whatever it holds."""
    client = aioredis.Redis.from_url(settings.redis)
    try:
        async for key in client.scan_iter(match=f"{settings.app_id}:*", count=1000):
            scan.keys += 1
            kind = (await client.type(key)).decode()
            held: Any = None
            if kind == "hash":
                held = await client.hgetall(key)  # type: ignore[misc]
            elif kind == "list":
                held = await client.lrange(key, 0, -1)  # type: ignore[misc]
            elif kind == "zset":
                held = await client.zrange(key, 0, -1, withscores=True)
            elif kind == "set":
                held = await client.smembers(key)  # type: ignore[misc]
            elif kind == "string":
                held = await client.get(key)
            scan.look(f"redis {key.decode(errors='replace')}", f"{key!r} {held!r}", values)
    finally:
        await client.aclose()


async def scan_mongo(settings: Settings, values: list[str], scan: Scan) -> list[str]:
    """Every document of every database of the app's namespaces, and of its privacy database."""
    client = mongo_client(settings.mongo)
    try:
        base = f"{settings.mongo_database}_{settings.namespace}"
        names = [n for n in await client.list_database_names() if n.startswith(base)]
        names.append(settings.privacy_database)
        for name in names:
            for collection in await client[name].list_collection_names():
                async for doc in client[name][collection].find({}):
                    scan.documents += 1
                    scan.look(f"mongodb {name}.{collection}", json.dumps(doc, default=_text), values)
        return names
    finally:
        await client.close()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


async def scan_everything(settings: Settings, values: list[str]) -> tuple[Scan, list[str]]:
    scan = Scan()
    await scan_kafka(settings, values, scan)
    await scan_redis(settings, values, scan)
    databases = await scan_mongo(settings, values, scan)
    return scan, databases
