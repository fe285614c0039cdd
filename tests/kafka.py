"""Reading topics back in tests: every record from the beginning, and the end offsets."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition

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
