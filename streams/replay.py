"""`memlog replay`: rebuild projections from the topics into a fresh namespace, then switch to it.

The rebuild runs the very projectors the worker runs (`streams.projectors.build_projections`), fed by a plain
consumer in large batches, so the rules are shared and writes go in bulk. Folds are never made
during a replay: the ThreadFolded events on the log are applied like the live worker applied
them. Events of erased subjects do not decrypt and are skipped; the ledger says why.

With `MEMLOG_REPLAY_WORKERS` above 1 the partitions are shared out among that many processes,
each with its own consumer and connections (a thread's events are all in one partition, so no
two processes touch one thread); the catch-up rounds run in this process.

When the rebuild has caught up, the consumer group of the new namespace gets the replay's
offsets, and the namespace pointer moves: the API follows it within a second, and workers
restart themselves in the new namespace from those offsets. Live reads keep working on the
old namespace until then.

A namespace switched to holds every projection: a replay of some projections that switches rebuilds
the others too (it says so), or reads would find them empty. The target is in the namespace registry
from the start (`building`), so erasures applied meanwhile reach it; one applied while a batch of
its subject was already being written is caught by a last pass over the privacy topic before the
switch (`_erase_meanwhile`). Without a switch, the namespace is recorded `abandoned`, and dropped
once its grace period has passed (streams.namespaces).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import multiprocessing
import queue as queues
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from aiokafka import AIOKafkaConsumer, TopicPartition

from memlog.adapters.mongo_lease import MongoReplayLease
from memlog.adapters.wiring import OpenBackends
from memlog.config.settings import Settings
from projections.namespaces import HEARTBEAT_SECONDS, valid_name
from projections.ports import Ledger, NamespaceRegistry
from projections.position import Position
from projections.stores import Stores
from schemas.errors import Conflict, DecodeError, InvalidEvent, MemlogError, StoreUnavailable
from schemas.events import SubjectErased, from_record
from streams.namespaces import Namespaces
from streams.projectors import PROJECTIONS
from streams.rebuild import (
    Rebuild,
    Reports,
    Shredded,
    commit_group,
    drain,
    gather,
    rebuild,
    replay_consumer,
)
from streams.steps.privacy import erase_in

log = logging.getLogger(__name__)

REPORT_EVERY_SECONDS = 0.25


class ReplayFailed(MemlogError):
    """A replay process stopped before its partitions were rebuilt."""


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
    projections: tuple[str, ...] = PROJECTIONS
    erased_meanwhile: int = 0  # subjects erased in the target by the last pass over the privacy topic
    expired: dict[tuple[str, str], int] = field(default_factory=dict)  # skipped: their period's key was shredded

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
    open_backends: OpenBackends,  # its clients, and its processes' (memlog.services.open_backends)
    since_ms: int | None = None,
    switch: bool = True,
    namespace: str | None = None,
    out: TextIO = sys.stderr,
    requested_by: str = "cli",
    watch: Callable[[Progress], None] | None = None,
    workers: int | None = None,
    lease_holder: str | None = None,
) -> ReplayReport:
    """Rebuild `projections` from the topics into a new namespace; move the pointer to it when `switch`
    (every projection is rebuilt then: see `needed`).

    `workers` processes share the partitions (default `MEMLOG_REPLAY_WORKERS`). It holds the replay lease
    throughout (as `lease_holder`: the API's replay id, which took it already), and switches only from
    the namespace it started from (DESIGN, "One replay at a time"): Conflict otherwise.
    """
    projections = needed(projections, switch, out)
    workers = settings.replay_workers if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    target = namespace or namespace_for_replay(settings.namespace)
    if not valid_name(target):
        raise ValueError(f"{target!r} is not a namespace name (letters, digits, '-' and '_', at most 48)")
    scoped = settings.model_copy(update={"namespace": target, "fold_agent": False})
    started = time.monotonic()
    events = 0
    dead_letters = 0
    parts: list[_Part] = []  # the other processes' counts
    async with rebuild(scoped, projections, open_backends) as here:
        shared, ledger = here.shared, here.shared.ledger
        previous = await shared.pointer.active() or settings.namespace
        request: dict[str, Any] = {"namespace": target, "previous": previous, "projections": list(projections)}
        request |= {"requested_by": requested_by, "workers": workers}
        holder = lease_holder or f"cli:{uuid.uuid4()}"
        await shared.lease.take(holder, f"replay into {target} by {requested_by}")
        consumer = replay_consumer(settings)  # once it holds the lease: a refused replay opens nothing
        namespaces = Namespaces(settings, shared.pointer, shared.namespaces, here.open)
        await namespaces.entries()  # the namespace reads use now is recorded (active) before the switch retires it
        await shared.namespaces.building(target, f"replay of {', '.join(projections)} by {requested_by}")
        alive = asyncio.create_task(_heartbeat(shared.namespaces, target, shared.lease, holder))
        try:
            await here.prepare()
            await ledger.record("replay-started", **request)
            # erasures past what the live privacy agent has applied may race the rebuild's writes
            erased_from = await _privacy_applied(here.open(previous), settings.partitions, after=True)
            await consumer.start()
            partitions = _assign(consumer, list(here.by_topic), settings.partitions)
            starts = await _starts(consumer, partitions, since_ms)
            ends = await consumer.end_offsets(partitions)
            progress = Progress(out, sum(max(ends[tp] - starts[tp], 0) for tp in partitions))
            if watch is not None:
                watch(progress)
            positions = dict(starts)
            batch = settings.replay_batch
            if workers > 1:
                consumer.pause(*partitions)  # this consumer waits for the catch-up rounds
                part = await _drain_in_processes(
                    scoped, projections, partitions, positions, ends, workers, progress, batch, open_backends
                )
                consumer.resume(*partitions)
                events += part.events
                dead_letters += part.dead_letters
                parts.append(part)
            events = await _catch_up(consumer, here.by_topic, partitions, positions, ends, batch, progress, events)
            progress.update(events, final=True)
            erased = await _erase_meanwhile(consumer, settings, here, erased_from)
            if switch:
                await _switch(settings, here, namespaces, previous, scoped.group_id, positions, projections)
            else:
                await shared.namespaces.abandon(target, "built with --no-switch")
        except BaseException as exc:
            with contextlib.suppress(Exception):  # it stays `building`, and goes once unheard of for long
                await shared.namespaces.abandon(target, f"replay failed: {type(exc).__name__}")
            raise
        finally:
            alive.cancel()
            await consumer.stop()
            await _release(shared.lease, holder)
        skipped = _skipped([here.shredded(), *(counts for part in parts for counts in part.shredded)])
        gone = _skipped([here.shredded(expired=True), *(counts for part in parts for counts in part.expired)])
        reasons = await _why_skipped(ledger, skipped)
        seconds = time.monotonic() - started
        counts: dict[str, Any] = {"events": events, "seconds": round(seconds, 3), "switched": switch}
        counts |= {"skipped_events": sum(skipped.values()), "skipped_subjects": len(skipped)}
        counts["expired_events"] = sum(gone.values())
        await ledger.record(
            "replayed",
            **request,
            **counts,
            erased_meanwhile=erased,
        )
        dead_letters += here.dead.count
        return ReplayReport(
            target, previous, events, seconds, switch, dead_letters, skipped, reasons, projections, erased, gone
        )


def needed(projections: tuple[str, ...], switch: bool, out: TextIO) -> tuple[str, ...]:
    """The projections a replay rebuilds: those asked for, and every other one when it switches.

    Reads switched to a fresh namespace find in it only what the replay built: a replay of `facts`
    alone would leave sessions and archives (which read the threads topic with facts' activity),
    and traces, empty until a worker rebuilt them from the start of their topics.
    """
    unknown = set(projections) - set(PROJECTIONS)
    if unknown:
        raise ValueError(f"unknown projection {', '.join(sorted(unknown))}; known: {', '.join(PROJECTIONS)}")
    if not switch:
        return tuple(name for name in PROJECTIONS if name in projections)
    added = [name for name in PROJECTIONS if name not in projections]
    if added:
        out.write(
            f"rebuilding {', '.join(added)} as well: the namespace reads switch to must hold every projection "
            "(add --no-switch to rebuild only " + ", ".join(projections) + ")\n"
        )
    return PROJECTIONS


async def _heartbeat(registry: NamespaceRegistry, namespace: str, lease: MongoReplayLease, holder: str) -> None:
    """Tell the registry the replay is alive, so nothing takes its namespace for one a crash left behind,
    and renew the replay lease (LEASE_SECONDS, several beats)."""
    while True:
        await asyncio.sleep(HEARTBEAT_SECONDS)
        with contextlib.suppress(StoreUnavailable, Conflict):  # told again on the next beat
            await registry.heard(namespace)
            await lease.take(holder)


async def _release(lease: MongoReplayLease, holder: str) -> None:
    with contextlib.suppress(StoreUnavailable):  # left to expire
        await lease.release(holder)


async def _privacy_applied(stores: Stores, partitions: int, *, after: bool = False) -> dict[int, int]:
    """The privacy agent's applied offset per partition in a namespace (-1: none); one past it when `after`."""
    return {p: await stores.privacy_checkpoints.applied("privacy", p) + int(after) for p in range(partitions)}


async def _erase_meanwhile(
    consumer: AIOKafkaConsumer, settings: Settings, here: Rebuild, starts: dict[int, int]
) -> int:
    """Erase from the target every subject whose erasure is on the privacy topic from `starts` on.

    The rebuild opens a batch with the data keys it holds, then writes it: an erasure applied in the
    target between the two leaves the batch behind. Every erasure that can have raced the rebuild is
    at or past the live privacy agent's checkpoint read before the rebuild began; after this pass the
    replay writes nothing more, and later erasures reach the target through the registry.
    """
    tps = [TopicPartition(settings.topic("privacy"), p) for p in starts]
    consumer.assign(tps)
    positions = {tp: starts[tp.partition] for tp in tps}
    for tp, offset in positions.items():
        consumer.seek(tp, offset)
    ends = await consumer.end_offsets(tps)
    subjects: set[tuple[str, str]] = set()
    while gathered := await gather(consumer, positions, ends, settings.replay_batch):
        for records in gathered.values():
            for record in records:
                try:
                    decoded = here.codec.decode(record.value)
                    event = from_record(decoded.full_name, decoded.record)
                except (DecodeError, InvalidEvent, KeyError, TypeError, ValueError):
                    continue  # poison: the live worker dead-lettered it
                if isinstance(event, SubjectErased) and event.envelope.subject is not None:
                    subjects.add((event.envelope.tenant, event.envelope.subject))
    for tenant, subject in sorted(subjects):
        await erase_in(here.stores, tenant, subject)
    return len(subjects)


async def _switch(
    settings: Settings,
    here: Rebuild,
    namespaces: Namespaces,
    previous: str,
    group_id: str,
    positions: dict[TopicPartition, int],
    projections: tuple[str, ...],
) -> None:
    """Hand over to the workers and move the pointer; then drop the namespaces whose grace has passed.

    The new namespace's consumer group starts where the rebuild stopped, and its privacy agent where the
    live one is: the erasures and exports that one applied are done (in the target too, which the
    registry held), so the workers do not apply every request of the privacy topic again; the requests
    past it (not yet applied by the live agent, however old) are applied by the new one.
    """
    privacy = await _privacy_applied(here.open(previous), settings.partitions)
    for partition, offset in privacy.items():
        if offset >= 0:
            await here.stores.privacy_checkpoints.advance(Position("privacy", partition, offset))
    privacy_tps = {TopicPartition(settings.topic("privacy"), p): offset + 1 for p, offset in privacy.items()}
    await commit_group(settings, group_id, {**positions, **privacy_tps})
    target = here.stores.namespace
    switched_at = dt.datetime.now(dt.UTC)
    await namespaces.switch(target, previous=previous, switched_at=switched_at, projections=list(projections))
    try:
        await namespaces.drop_due()
    except StoreUnavailable as exc:  # switched all the same; the workers drop them later
        log.warning("namespaces out of use not dropped now: %s", exc)


def _assign(consumer: AIOKafkaConsumer, topics: list[str], partitions: int) -> list[TopicPartition]:
    """Every partition of the topics, assigned to the consumer (the settings' count where metadata has none)."""
    assigned = [
        TopicPartition(topic, p)
        for topic in topics
        for p in sorted(consumer.partitions_for_topic(topic) or range(partitions))
    ]
    consumer.assign(assigned)
    return assigned


async def _catch_up(
    consumer: AIOKafkaConsumer,
    by_topic: dict[str, list[Any]],
    partitions: list[TopicPartition],
    positions: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
    batch: int,
    progress: Reports,
    events: int,
) -> int:
    """Drain the partitions from `positions` to `ends`; returns the events count with what was drained added."""
    for _ in range(3):  # catch up with what arrived meanwhile, a couple of times
        for tp in partitions:
            consumer.seek(tp, positions[tp])
        events += await drain(consumer, by_topic, positions, ends, batch, progress, events)
        newer = await consumer.end_offsets(partitions)
        if newer == ends:
            break
        ends = newer
    return events


async def _why_skipped(ledger: Ledger, skipped: dict[tuple[str, str], int]) -> dict[tuple[str, str], str]:
    """Per subject whose events were skipped: the erasure the ledger holds, if any."""
    reasons = {}
    for tenant, subject in skipped:
        entry = await ledger.erased(tenant, subject)
        reasons[(tenant, subject)] = (
            f"erased {entry['at'].isoformat()} (request {entry['_id']})"
            if entry is not None
            else "data key gone, and no erasure in the ledger"
        )
    return reasons


def _skipped(parts: list[Shredded]) -> dict[tuple[str, str], int]:
    """Events skipped per erased subject: summed over processes per projection, the most of any projection.

    Two projections of one topic (sessions and archives) skip the same records, so they are not added up.
    """
    per_projection: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
    for part in parts:
        for projection, counts in part.items():
            total = per_projection.setdefault(projection, {})
            for who, count in counts.items():
                total[who] = total.get(who, 0) + count
    skipped: dict[tuple[str, str], int] = {}
    for counts in per_projection.values():
        for who, count in counts.items():
            skipped[who] = max(skipped.get(who, 0), count)
    return skipped


@dataclass
class _Part:
    events: int
    dead_letters: int
    shredded: list[Shredded]
    expired: list[Shredded]


def share_partitions(
    partitions: list[TopicPartition], records: dict[TopicPartition, int], workers: int
) -> list[list[TopicPartition]]:
    """The partitions in at most `workers` groups of about as many records each, one per process.

    A partition number goes whole to one group, with every topic's partition of that number: one
    subject's events, on whichever topic, are all under one number (they share a key), so no two
    processes touch one subject. Largest numbers first, each to the group with the fewest records so
    far (then the fewest partitions): a few busy tenants' partitions no longer leave one process with
    most of the replay while the other waits. The same partitions and counts give the same groups.
    """
    by_number: dict[int, list[TopicPartition]] = {}
    for tp in partitions:
        by_number.setdefault(tp.partition, []).append(tp)
    sizes = {number: sum(records.get(tp, 0) for tp in tps) for number, tps in by_number.items()}
    groups: list[list[TopicPartition]] = [[] for _ in range(min(workers, len(by_number)))]
    loads = [0] * len(groups)
    for number in sorted(by_number, key=lambda n: (-sizes[n], n)):
        least = min(range(len(groups)), key=lambda i: (loads[i], len(groups[i]), i))
        groups[least].extend(by_number[number])
        loads[least] += sizes[number]
    return groups


async def _drain_in_processes(
    scoped: Settings,
    projections: tuple[str, ...],
    partitions: list[TopicPartition],
    positions: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
    workers: int,
    progress: Progress,
    batch: int,
    open_backends: OpenBackends,
) -> _Part:
    """Partitions shared out among `workers` processes (`share_partitions`); `positions` moves to `ends`."""
    context = multiprocessing.get_context("spawn")  # no forked event loops or sockets
    messages: Any = context.Queue()
    groups = share_partitions(partitions, {tp: max(ends[tp] - positions[tp], 0) for tp in partitions}, workers)
    processes = []
    for index, group in enumerate(groups):
        share = [(tp.topic, tp.partition, positions[tp], ends[tp]) for tp in group]
        process = context.Process(
            target=_part_main,
            args=(index, scoped, projections, share, batch, messages, open_backends),
            name=f"memlog-replay-{index}",
            daemon=True,
        )
        process.start()
        processes.append(process)
    done = [0] * len(groups)
    results: dict[int, dict[str, Any]] = {}

    def take(message: tuple[str, int, Any]) -> None:
        kind, index, payload = message
        if kind == "failed":
            raise ReplayFailed(f"replay process {index} failed: {payload}")
        if kind == "done":
            results[index] = payload
            done[index] = payload["events"]
        else:
            done[index] = payload
        progress.update(sum(done))

    try:
        while len(results) < len(groups):
            try:
                take(await asyncio.to_thread(messages.get, True, 0.5))
            except queues.Empty:
                _check_alive(processes, results, messages, take)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            await asyncio.to_thread(process.join, 10.0)
        messages.close()
    for tp in partitions:
        positions[tp] = ends[tp]
    return _Part(
        events=sum(result["events"] for result in results.values()),
        dead_letters=sum(result["dead_letters"] for result in results.values()),
        shredded=[result["shredded"] for result in results.values()],
        expired=[result["expired"] for result in results.values()],
    )


def _check_alive(
    processes: list[Any],
    results: dict[int, dict[str, Any]],
    messages: Any,
    take: Callable[[tuple[str, int, Any]], None],
) -> None:
    """Raise ReplayFailed for a process that exited without saying it was done."""
    gone = [i for i, process in enumerate(processes) if i not in results and not process.is_alive()]
    if not gone:
        return
    with contextlib.suppress(queues.Empty):  # a message may trail its sender's exit
        while len(results) < len(processes):
            take(messages.get(True, 1.0))
    for index in gone:
        if index not in results:
            code = processes[index].exitcode
            raise ReplayFailed(f"replay process {index} exited ({code}) before its partitions were done")


class _Reporting:
    """A replay process's progress, told to the one that started it a few times a second."""

    def __init__(self, index: int, messages: Any) -> None:
        self._index = index
        self._messages = messages
        self._told = 0.0

    def update(self, done: int, final: bool = False) -> None:
        now = time.monotonic()
        if final or now - self._told >= REPORT_EVERY_SECONDS:
            self._told = now
            self._messages.put(("progress", self._index, done))


def _part_main(
    index: int,
    scoped: Settings,
    projections: tuple[str, ...],
    share: list[tuple[str, int, int, int]],
    batch: int,
    messages: Any,
    open_backends: OpenBackends,
) -> None:
    """Entry point of a replay process: rebuild `share` (topic, partition, from, to) and say how it went.
    `open_backends` (a module-level function, sent by name) opens the process's own clients."""
    try:
        result = asyncio.run(_part(index, scoped, projections, share, batch, messages, open_backends))
    except BaseException as exc:
        messages.put(("failed", index, f"{type(exc).__name__}: {exc}"))
        raise
    messages.put(("done", index, result))


async def _part(
    index: int,
    scoped: Settings,
    projections: tuple[str, ...],
    share: list[tuple[str, int, int, int]],
    batch: int,
    messages: Any,
    open_backends: OpenBackends,
) -> dict[str, Any]:
    async with rebuild(scoped, projections, open_backends) as part:
        consumer = replay_consumer(scoped)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, partition) for topic, partition, _, _ in share]
            consumer.assign(tps)
            positions = {TopicPartition(t, p): start for t, p, start, _ in share}
            ends = {TopicPartition(t, p): end for t, p, _, end in share}
            for tp, offset in positions.items():
                consumer.seek(tp, offset)
            by_topic = {topic: part.by_topic[topic] for topic in {tp.topic for tp in tps}}
            events = await drain(consumer, by_topic, positions, ends, batch, _Reporting(index, messages), 0)
        finally:
            await consumer.stop()
        shredded = part.shredded()
        return {"events": events, "dead_letters": part.dead.count, "shredded": shredded, "expired": part.shredded(True)}


async def _starts(
    consumer: AIOKafkaConsumer, partitions: list[TopicPartition], since_ms: int | None
) -> dict[TopicPartition, int]:
    beginnings = await consumer.beginning_offsets(partitions)
    if since_ms is None:
        return dict(beginnings)
    found = await consumer.offsets_for_times(dict.fromkeys(partitions, since_ms))
    ends = await consumer.end_offsets(partitions)
    return {tp: (found[tp].offset if found.get(tp) is not None else ends[tp]) for tp in partitions}
