"""`memlog replay`: rebuild projections from the topics into a fresh namespace, then switch to it.

The rebuild runs the very projectors the worker runs (`build_projections`), fed by a plain
consumer in large batches, so the rules are shared and writes go in bulk. Folds are never made
during a replay: the ThreadFolded events on the log are applied like the live worker applied
them. Events of erased subjects do not decrypt and are skipped; the ledger says why.

When the rebuild has caught up, the consumer group of the new namespace gets the replay's
offsets, and the namespace pointer moves: the API follows it within a second, and workers
restart themselves in the new namespace from those offsets. Live reads keep working on the
old namespace until then.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from memlog import connections
from memlog.metrics import Metrics
from memlog.services import NamespacePointer, make_codec
from memlog.settings import Settings
from projections.privacy_store import MongoKeyVault, MongoLedger
from streams.projector import Record
from streams.sealer import Sealer
from streams.worker import PROJECTIONS, active_namespace, build_projections

SOURCES = {"sessions": "threads", "archives": "threads", "facts": "facts", "traces": "traces"}


class DeadLettersCounted:
    """Replay does not send dead letters again (the live worker did); it only counts them."""

    def __init__(self) -> None:
        self.count = 0

    async def send(self, key: bytes | None, value: bytes) -> None:  # noqa: ARG002 (the sink's signature)
        self.count += 1


@dataclass
class ReplayReport:
    namespace: str
    previous: str
    events: int
    seconds: float
    switched: bool
    dead_letters: int
    skipped: dict[tuple[str, str], int] = field(default_factory=dict)
    reasons: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


class Progress:
    """One line on a terminal, redrawn: events, rate, ETA."""

    def __init__(self, out: TextIO, total: int) -> None:
        self._out = out
        self.total = total
        self.done = 0
        self._total = max(total, 1)
        self._started = time.monotonic()
        self._drawn = 0.0

    def update(self, done: int, final: bool = False) -> None:
        self.done = done
        now = time.monotonic()
        if not final and now - self._drawn < 0.5:
            return
        self._drawn = now
        elapsed = max(now - self._started, 1e-9)
        rate = done / elapsed
        left = max(self._total - done, 0)
        eta = left / rate if rate else 0.0
        share = min(done / self._total, 1.0)
        bar = "#" * int(share * 30)
        self._out.write(
            f"\r[{bar:<30}] {done:,}/{self._total:,} events  {rate:,.0f}/s  ETA {eta:,.0f}s" + ("\n" if final else "")
        )
        self._out.flush()


def namespace_for_replay(base: str, now: dt.datetime | None = None) -> str:
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d%H%M%S")
    return f"{base}-r{stamp}"


async def replay(
    settings: Settings,
    projections: tuple[str, ...] = PROJECTIONS,
    *,
    since_ms: int | None = None,
    switch: bool = True,
    namespace: str | None = None,
    out: TextIO = sys.stderr,
    requested_by: str = "cli",
    watch: Callable[[Progress], None] | None = None,
) -> ReplayReport:
    """Rebuild `projections` from the topics into a new namespace; move the pointer to it when `switch`."""
    unknown = set(projections) - set(PROJECTIONS)
    if unknown:
        raise ValueError(f"unknown projection {', '.join(sorted(unknown))}; known: {', '.join(PROJECTIONS)}")
    previous = await active_namespace(settings)
    target = namespace or namespace_for_replay(settings.namespace)
    scoped = settings.model_copy(update={"namespace": target, "fold_agent": False})
    codec = make_codec(settings)
    redis = connections.redis_client(settings)
    mongo = connections.mongo(settings)
    privacy = mongo[settings.privacy_database]
    master = settings.master_key_bytes()
    sealer = Sealer(MongoKeyVault(privacy, master), cache_seconds=3600.0)  # keys cannot come back once gone
    ledger = MongoLedger(privacy, master)
    dead = DeadLettersCounted()
    built = build_projections(
        scoped,
        codec=codec,
        sealer=sealer,
        redis=redis,
        database=mongo[scoped.mongo_db_name],
        dead_letters=dead,
        metrics=Metrics(),
        which=projections,
    )
    by_topic: dict[str, list[Any]] = {}
    for short, projector in built.projectors:
        by_topic.setdefault(settings.topic(short), []).append(projector)
    consumer = AIOKafkaConsumer(
        **connections.kafka_options(settings),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
    )
    started = time.monotonic()
    events = 0
    try:
        await built.prepare()
        await ledger.record(
            "replay-started",
            namespace=target,
            previous=previous,
            projections=list(projections),
            requested_by=requested_by,
        )
        await consumer.start()
        partitions = [
            TopicPartition(topic, p)
            for topic in by_topic
            for p in sorted(consumer.partitions_for_topic(topic) or range(settings.partitions))
        ]
        consumer.assign(partitions)
        starts = await _starts(consumer, partitions, since_ms)
        for tp, offset in starts.items():
            consumer.seek(tp, offset)
        ends = await consumer.end_offsets(partitions)
        # erasures that arrive while the rebuild runs are applied to it by the workers after the switch
        privacy_tps = [TopicPartition(settings.topic("privacy"), p) for p in range(settings.partitions)]
        privacy_from = await consumer.end_offsets(privacy_tps)
        progress = Progress(out, sum(max(ends[tp] - starts[tp], 0) for tp in partitions))
        if watch is not None:
            watch(progress)
        positions = dict(starts)
        for _ in range(3):  # catch up with what arrived meanwhile, a couple of times
            for tp in partitions:
                consumer.seek(tp, positions[tp])
            events += await _drain(consumer, by_topic, positions, ends, settings.replay_batch, progress, events)
            newer = await consumer.end_offsets(partitions)
            if newer == ends:
                break
            ends = newer
        progress.update(events, final=True)
        if switch:
            await _commit_group(settings, scoped.group_id, {**positions, **privacy_from})
            await NamespacePointer(privacy, settings.app_id).switch(
                target, previous=previous, switched_at=dt.datetime.now(dt.UTC), projections=list(projections)
            )
        skipped: dict[tuple[str, str], int] = {}
        for projectors in by_topic.values():
            for projector in projectors:
                for who, count in projector.shredded_by.items():
                    skipped[who] = max(skipped.get(who, 0), count)
        reasons = {}
        for tenant, subject in skipped:
            entry = await ledger.erased(tenant, subject)
            reasons[(tenant, subject)] = (
                f"erased {entry['at'].isoformat()} (request {entry['_id']})"
                if entry is not None
                else "data key gone, and no erasure in the ledger"
            )
        seconds = time.monotonic() - started
        await ledger.record(
            "replayed",
            namespace=target,
            previous=previous,
            projections=list(projections),
            events=events,
            seconds=round(seconds, 3),
            switched=switch,
            skipped_events=sum(skipped.values()),
            skipped_subjects=len(skipped),
            requested_by=requested_by,
        )
        return ReplayReport(target, previous, events, seconds, switch, dead.count, skipped, reasons)
    finally:
        await consumer.stop()
        await redis.aclose()
        await mongo.close()
        codec.close()


async def _starts(
    consumer: AIOKafkaConsumer, partitions: list[TopicPartition], since_ms: int | None
) -> dict[TopicPartition, int]:
    beginnings = await consumer.beginning_offsets(partitions)
    if since_ms is None:
        return dict(beginnings)
    found = await consumer.offsets_for_times(dict.fromkeys(partitions, since_ms))
    ends = await consumer.end_offsets(partitions)
    return {tp: (found[tp].offset if found.get(tp) is not None else ends[tp]) for tp in partitions}


async def _drain(
    consumer: AIOKafkaConsumer,
    by_topic: dict[str, list[Any]],
    positions: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
    batch: int,
    progress: Progress,
    done: int,
) -> int:
    applied = 0
    while gathered := await _gather(consumer, positions, ends, batch):
        # one batch per partition and projection: they touch different subjects and checkpoints,
        # so they run side by side and one's store round trips overlap another's decoding
        await asyncio.gather(
            *(projector.handle(records) for tp, records in gathered.items() for projector in by_topic[tp.topic])
        )
        applied += sum(len(records) for records in gathered.values())
        progress.update(done + applied)
    return applied


async def _gather(
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
            wanted = [Record(r.partition, r.offset, r.key, r.value) for r in records if r.offset < ends[tp]]
            if wanted:
                gathered.setdefault(tp, []).extend(wanted)
                positions[tp] = wanted[-1].offset + 1
                count += len(wanted)
    return gathered


async def _commit_group(settings: Settings, group_id: str, positions: dict[TopicPartition, int]) -> None:
    """Hand over to the workers: the new namespace's consumer group starts where the replay stopped."""
    committer = AIOKafkaConsumer(**connections.kafka_options(settings), group_id=group_id, enable_auto_commit=False)
    await committer.start()
    try:
        committer.assign(list(positions))
        await committer.commit({tp: OffsetAndMetadata(offset, "") for tp, offset in positions.items()})
    finally:
        await committer.stop()
