"""What every projection agent does with one record: decode, validate, apply, or dead-letter it.

Decoding and validation failures are poison: the record goes to the dead-letter topic with the
error and its source position, the checkpoint moves on, and a counter shows it. Store outages are
not poison: the record is retried with backoff and its offset is not committed until it lands.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from memlog.errors import DecodeError, InvalidEvent, LogUnavailable, StoreUnavailable
from projections.position import Position
from projections.stores import Checkpoints
from schemas.codec import Codec
from schemas.events import ThreadEvent, from_record, now_ms

log = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 0.2
RETRY_MAX_SECONDS = 5.0


class DeadLetterSink(Protocol):
    async def send(self, key: bytes | None, value: bytes) -> None: ...


class DeadLetterCounter(Protocol):
    async def count_dead_letter(self, topic: str) -> None: ...


Apply = Callable[[ThreadEvent, Position], Awaitable[None]]


class Projector:
    """Runs one projection's rule on the records of one topic.

    Args:
        name: the projection, named in dead letters and logs.
        topic: short topic name (threads, facts, ...) used in positions.
        source_topic: the full Kafka topic name.
        codec: decodes records.
        apply: the projection's step for one valid event.
        checkpoints: where poison records still advance the applied position.
        dead_letters: the dead-letter topic.
        counter: counts dead letters.
    """

    def __init__(
        self,
        *,
        name: str,
        topic: str,
        source_topic: str,
        codec: Codec,
        apply: Apply,
        checkpoints: Checkpoints,
        dead_letters: DeadLetterSink,
        counter: DeadLetterCounter,
    ) -> None:
        self.name = name
        self.topic = topic
        self.source_topic = source_topic
        self._codec = codec
        self._apply = apply
        self._checkpoints = checkpoints
        self._dead_letters = dead_letters
        self._counter = counter
        self.applied = 0
        self.dead = 0

    async def handle(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        position = Position(self.topic, partition, offset)
        try:
            decoded = self._codec.decode(value)
            event = from_record(decoded.full_name, decoded.record)
        except (DecodeError, InvalidEvent, KeyError, TypeError, ValueError) as exc:
            await self._retrying(lambda: self._dead_letter(position, key, value, exc))
            return
        await self._retrying(lambda: self._apply(event, position))
        self.applied += 1

    async def _dead_letter(self, position: Position, key: bytes | None, value: bytes | None, error: Exception) -> None:
        record = {
            "source_topic": self.source_topic,
            "source_partition": position.partition,
            "source_offset": position.offset,
            "key": key,
            "value": value,
            "error": f"{type(error).__name__}: {error}",
            "consumer": self.name,
            "failed_at": now_ms(),
        }
        await self._dead_letters.send(key, self._codec.encode("memlog.DeadLetter", record))
        await self._counter.count_dead_letter(self.source_topic)
        await self._checkpoints.advance(position)
        self.dead += 1
        log.warning("%s: %s at %s sent to the dead-letter topic: %s", self.name, self.source_topic,
                    position.token(), error)

    async def _retrying(self, step: Callable[[], Awaitable[None]]) -> None:
        delay = RETRY_FIRST_SECONDS
        started = time.monotonic()
        while True:
            try:
                await step()
                return
            except (StoreUnavailable, LogUnavailable) as exc:
                log.warning("%s: store unavailable for %.0fs, retrying in %.1fs: %s", self.name,
                            time.monotonic() - started, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)
