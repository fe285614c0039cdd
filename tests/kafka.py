"""Reading topics back in tests: every record from the beginning, and the end offsets; deleting a
session's topics."""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from memlog.config.settings import Settings


async def consume_all(settings: Settings, topic: str, expected: int) -> list[tuple[int, int, bytes, bytes]]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(settings.partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        found: list[tuple[int, int, bytes, bytes]] = []
        while len(found) < expected:
            batch = await consumer.getmany(timeout_ms=5000)
            if not batch:
                break
            for records in batch.values():
                found.extend((r.partition, r.offset, r.key, r.value) for r in records)
        return found
    finally:
        await consumer.stop()


async def end_offsets(settings: Settings) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(
            [TopicPartition(settings.threads_topic, p) for p in range(settings.partitions)]
        )
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def delete_topics_under(settings: Settings, prefixes: list[str], chunk: int = 200) -> list[str]:
    """Delete every topic named `<prefix>.<anything>` for these prefixes on the settings' broker; the names
    deleted, once the broker lists them no more. A broker that is gone (a fault test's last act) is logged:
    the topics stay, the run does not fail."""
    if not prefixes:
        return []
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap, request_timeout_ms=30000)
    names: list[str] = []
    deleted: list[str] = []
    try:
        await admin.start()
        wanted = tuple(f"{prefix}." for prefix in prefixes)
        names = sorted(name for name in await admin.list_topics() if name.startswith(wanted))
        for start in range(0, len(names), chunk):
            await admin.delete_topics(names[start : start + chunk], timeout_ms=30000)
            deleted.extend(names[start : start + chunk])
        for _ in range(150):  # the listing follows the deletion a moment later
            if not set(deleted) & set(await admin.list_topics()):
                break
            await asyncio.sleep(0.2)
    except KafkaError as exc:
        logging.getLogger(__name__).warning("kept %d test topics: %s", len(names) - len(deleted), exc)
    finally:
        await admin.close()
    return deleted
