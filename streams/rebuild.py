"""The machinery of a rebuild: one process's projections writing into a target namespace, fed by a
plain consumer in large batches, and the hand-over of the consumer group's offsets (streams.replay
runs it, in one process or several)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from memlog.adapters import connections
from memlog.adapters.wiring import OpenBackends as OpenBackends  # noqa: PLC0414 (memlog.app.replays names it here)
from memlog.adapters.wiring import PrivacyStores
from memlog.config.settings import Settings
from projections.stores import Stores
from schemas.codec import Codec
from streams.metrics import Metrics
from streams.projector import Projector, Record
from streams.projectors import build_projections
from streams.sealer import Sealer

# events applied between two full collections while a rebuild runs (the cyclic collector is off meanwhile)
COLLECT_EVERY_EVENTS = 500_000


class _Collector:
    """The process's cyclic collector while rebuilds run: off, with a full collection every
    COLLECT_EVERY_EVENTS events applied; put back as it was when the last rebuild ends. Replays started
    through the API run in its process, and may overlap.

    Why off: a replay allocates a few dozen containers per event, and the collector walked each of them
    once they were 100,000 (at the default thresholds, far more often: 40 % of a 360,000-event replay's
    time). Measured on a 900,000-event sessions replay: 240 collections, 11.8 us per event, 9 % of its
    CPU. What a replay keeps is not cyclic: reference counting frees it. The few cycles it makes (asyncio
    futures, exceptions; measured: under 1,000 objects in a 270,000-event replay) wait for the next full
    collection, which walks everything once per COLLECT_EVERY_EVENTS events.
    """

    def __init__(self) -> None:
        self._running = 0
        self._was_enabled = True
        self._since = 0

    def enter(self) -> None:
        if self._running == 0:
            self._was_enabled = gc.isenabled()
            self._since = 0
            gc.disable()
        self._running += 1

    def applied(self, events: int) -> None:
        """Count events applied; collect everything once COLLECT_EVERY_EVENTS have been since the last time."""
        self._since += events
        if self._since >= COLLECT_EVERY_EVENTS:
            self._since = 0
            gc.collect()

    def leave(self) -> None:
        self._running -= 1
        if self._running == 0 and self._was_enabled:
            gc.enable()


COLLECTOR = _Collector()

# (topic, projection) -> (tenant, subject) -> events skipped because the subject was erased
Shredded = dict[tuple[str, str], dict[tuple[str, str], int]]


class Reports(Protocol):
    def update(self, done: int, final: bool = False) -> None: ...


class DeadLettersCounted:
    """Replay does not send dead letters again (the live worker did); it only counts them."""

    def __init__(self) -> None:
        self.count = 0

    async def send(self, key: bytes | None, value: bytes) -> None:  # noqa: ARG002 (the sink's signature)
        self.count += 1


@dataclass
class Rebuild:
    """One process's projections writing into the target namespace, by source topic."""

    by_topic: dict[str, list[Any]]
    dead: DeadLettersCounted
    shared: PrivacyStores  # the stores every namespace shares
    prepare: Callable[[], Any]
    codec: Codec
    stores: Stores  # the target namespace's
    open: Callable[[str], Stores]  # any namespace's, over the same clients

    def shredded(self, expired: bool = False) -> Shredded:
        """Records skipped per projection and subject: of erased subjects, or with `expired` of periods
        whose key was shredded on schedule."""
        return {
            (topic, projector.name): dict(projector.expired_by if expired else projector.shredded_by)
            for topic, projectors in self.by_topic.items()
            for projector in projectors
        }


@contextlib.asynccontextmanager
async def rebuild(
    scoped: Settings, projections: tuple[str, ...], open_backends: OpenBackends
) -> AsyncIterator[Rebuild]:
    """`scoped` names the target namespace; connections, topics and the key vault do not depend on it.
    The clients are this rebuild's own, opened by `open_backends` (the composition root's) and closed
    when it ends."""
    backends = open_backends(scoped)
    COLLECTOR.enter()
    try:
        sealer = Sealer(backends.shared.vault, cache_seconds=3600.0)  # keys cannot come back once gone
        dead = DeadLettersCounted()
        stores = backends.stores(scoped.namespace)
        built = build_projections(
            scoped,
            codec=backends.codec,
            sealer=sealer,
            stores=stores,
            dead_letters=dead,
            metrics=Metrics(),
            which=projections,
            replaying=True,
        )
        by_topic: dict[str, list[Any]] = {}
        for short, projector in built.projectors:
            by_topic.setdefault(scoped.topic(short), []).append(projector)
        yield Rebuild(by_topic, dead, backends.shared, built.prepare, backends.codec, stores, backends.stores)
    finally:
        await backends.close()
        COLLECTOR.leave()


def replay_consumer(settings: Settings) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        **connections.kafka_options(settings),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
    )


async def drain(
    consumer: AIOKafkaConsumer,
    by_topic: dict[str, list[Any]],
    positions: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
    batch: int,
    progress: Reports,
    done: int,
) -> int:
    applied = 0
    while gathered := await gather(consumer, positions, ends, batch):
        # partitions touch different subjects and checkpoints, so they run side by side and one's
        # store round trips overlap another's decoding
        await asyncio.gather(*(apply_all(by_topic[tp.topic], records) for tp, records in gathered.items()))
        count = sum(len(records) for records in gathered.values())
        applied += count
        COLLECTOR.applied(count)
        progress.update(done + applied)
    return applied


async def apply_all(projectors: list[Projector[Any]], records: list[Record]) -> None:
    """A partition's batch decoded and opened once, then applied by every projection of its topic."""
    read = await projectors[0].read(records)
    await asyncio.gather(*(projector.apply(records, read) for projector in projectors))


async def gather(
    consumer: AIOKafkaConsumer,
    positions: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
    batch: int,
) -> dict[TopicPartition, list[Record]]:
    """Up to `batch` records below `ends`, by partition; empty once every partition reached its end.

    A full batch rather than one fetch: the bigger a partition's run, the more of a thread's events
    go to the store in one call.
    """
    gathered: dict[TopicPartition, list[Record]] = {}
    count = 0
    while count < batch and any(positions[tp] < ends[tp] for tp in ends):
        fetched = await consumer.getmany(timeout_ms=1000, max_records=batch - count)
        for tp, records in fetched.items():
            wanted = [
                Record(r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in records if r.offset < ends[tp]
            ]
            if wanted:
                gathered.setdefault(tp, []).extend(wanted)
                positions[tp] = wanted[-1].offset + 1
                count += len(wanted)
    return gathered


async def commit_group(settings: Settings, group_id: str, positions: dict[TopicPartition, int]) -> None:
    """Hand over to the workers: the new namespace's consumer group starts where the replay stopped."""
    committer = AIOKafkaConsumer(**connections.kafka_options(settings), group_id=group_id, enable_auto_commit=False)
    await committer.start()
    try:
        committer.assign(list(positions))
        await committer.commit({tp: OffsetAndMetadata(offset, "") for tp, offset in positions.items()})
    finally:
        await committer.stop()
