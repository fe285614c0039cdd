"""How far the log reaches: the end offset of each partition, read with a consumer that joins no group."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from memlog.adapters.connections import kafka_options
from memlog.config.settings import Settings
from schemas.errors import LogUnavailable

REQUEST_TIMEOUT_MS = 10_000


class LogPositions:
    """End offsets of memlog's topics; Kafka's errors come out as LogUnavailable.

    Args:
        settings: bootstrap servers, credentials and topic names come from here.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._consumer: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        """Connect; the client is made here because it belongs to the running event loop."""
        consumer = AIOKafkaConsumer(
            **kafka_options(self._settings), enable_auto_commit=False, request_timeout_ms=REQUEST_TIMEOUT_MS
        )
        try:
            await asyncio.wait_for(consumer.start(), REQUEST_TIMEOUT_MS / 1000)
        except (KafkaError, TimeoutError) as exc:
            await consumer.stop()
            raise LogUnavailable(f"kafka at {self._settings.bootstrap}: {exc!r}") from exc
        self._consumer = consumer

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    async def ends(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """The next offset to be written, per (short topic name, partition) of each subject-keyed topic.

        Connects first if it has not yet (a worker may start while Kafka is away); a broker that does
        not answer within the request timeout is unavailable, never a wait without end.
        """
        if self._consumer is None:
            await self.start()
        assert self._consumer is not None
        wanted = {
            TopicPartition(self._settings.topic(short), p): (short, p)
            for short in topics
            for p in range(self._settings.partitions)
        }
        try:
            ends = await asyncio.wait_for(self._consumer.end_offsets(list(wanted)), REQUEST_TIMEOUT_MS / 1000)
        except KafkaError as exc:
            raise LogUnavailable(f"kafka: {exc}") from exc
        except TimeoutError as exc:
            raise LogUnavailable(f"kafka gave no end offsets within {REQUEST_TIMEOUT_MS / 1000:.0f}s") from exc
        return {wanted[tp]: offset for tp, offset in ends.items()}
