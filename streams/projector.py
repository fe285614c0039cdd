"""What every projection agent does with a batch of records: decode, validate, apply, or dead-letter.

Decoding and validation failures are poison: the record goes to the dead-letter topic with the
error and its source position, the checkpoint moves on, and a counter shows it. Store outages are
not poison: the batch is retried with backoff and its offsets are not committed until it lands.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Protocol, TypeVar, cast

from projections.ports import Checkpoints, Counters
from projections.position import Position
from projections.sealing import sealed_key_id
from schemas.codec import Codec, Decoded
from schemas.errors import DecodeError, InvalidEvent, LogUnavailable, PeriodShredded, Shredded, StoreUnavailable
from schemas.events import Event, from_record, now_ms
from schemas.frozen import quick
from streams.metrics import Metrics
from streams.sealer import Sealer
from streams.shared_reads import SharedReads
from streams.tracing import applying

log = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 0.2
RETRY_MAX_SECONDS = 5.0
# A batch's records are applied, and their checkpoint advanced, in steps of at most this many bytes of
# records: a batch of costly records (archive entries of tens of KB, each with its postings) then
# shows progress step by step, and the watchdog never takes a long batch for a stalled one.
APPLY_STEP_BYTES = 1 << 20


class DeadLetterSink(Protocol):
    async def send(self, key: bytes | None, value: bytes) -> None: ...


@quick
@dataclass(frozen=True)
class Erased:
    """A record of an erased subject, or of a period whose key was shredded on schedule (`period`): its
    data key is gone, so it no longer opens."""

    tenant: str
    subject: str
    period: str | None = None


Read = Event | Erased | Exception  # what a record turned out to be


@quick
@dataclass(frozen=True)
class Record:
    """A Kafka record as an agent hands it over."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()  # a traceparent among them links the apply to its produce


E = TypeVar("E", bound=Event)
E_contra = TypeVar("E_contra", bound=Event, contravariant=True)


class Step(Protocol[E_contra]):
    """A projection's work for valid events, in log order; idempotent by position."""

    async def __call__(self, events: Sequence[tuple[E_contra, Position]]) -> None: ...


async def advance_past(checkpoints: Checkpoints, events: Sequence[tuple[Event, Position]]) -> None:
    """After a batch's store write: record the newest position of each partition as applied."""
    newest: dict[int, Position] = {}
    for _, position in events:
        newest[position.partition] = max(newest.get(position.partition, position), position)
    advance_many = getattr(checkpoints, "advance_many", None)  # one round trip for them all, where offered
    if advance_many is not None:
        await advance_many(list(newest.values()))
        return
    for position in newest.values():
        await checkpoints.advance(position)


class Projector(Generic[E]):
    """Runs one projection's step on the records of one topic.

    Args:
        name: the projection, named in dead letters and logs.
        topic: short topic name (threads, facts, ...) used in positions.
        source_topic: the full Kafka topic name.
        codec: decodes records.
        accepts: the event types that belong on this topic; any other is dead-lettered.
        step: the projection's work for a run of valid events.
        checkpoints: where poison records still advance the applied position.
        dead_letters: the dead-letter topic.
        counter: counts dead letters.
        metrics: Prometheus series of the process.
        sealer: opens sealed records; without one, a sealed record is poison.
        shared: what the records of this topic read as, shared with the other projections of the
            process that read the topic (`streams/shared_reads.py`).
    """

    def __init__(
        self,
        *,
        name: str,
        topic: str,
        source_topic: str,
        codec: Codec,
        accepts: tuple[type[E], ...],
        step: Step[E],
        checkpoints: Checkpoints,
        dead_letters: DeadLetterSink,
        counter: Counters,
        metrics: Metrics | None = None,
        sealer: Sealer | None = None,
        shared: SharedReads | None = None,
    ) -> None:
        self.name = name
        self.topic = topic
        self.source_topic = source_topic
        self._codec = codec
        self._accepts = accepts
        self._step = step
        self._checkpoints = checkpoints
        self._dead_letters = dead_letters
        self._counter = counter
        self._metrics = metrics
        self._sealer = sealer
        self._shared = shared
        self.shredded_by: dict[tuple[str, str], int] = {}  # records skipped because their subject was erased
        self.expired_by: dict[tuple[str, str], int] = {}  # records skipped because their period's key was shredded
        self.unavailable = False  # waiting for a store or the log to come back (the watchdog leaves it be)
        self.batch_started: float | None = None  # monotonic, while a batch is in progress (the watchdog reads it)
        if metrics is not None:
            metrics.unavailable.labels(name).set(0)

    async def applied(self, partition: int) -> int:
        """The newest offset of `partition` this projection has applied, -1 when none."""
        return await self._checkpoints.applied(self.topic, partition)

    async def applied_many(self, partitions: Sequence[int]) -> list[int]:
        """The newest applied offset of each of `partitions` (-1 where none), in one round trip where the
        checkpoints offer it (the watchdog reads them every few seconds)."""
        many = getattr(self._checkpoints, "applied_many", None)
        if many is not None:
            offsets: list[int] = await many(self.topic, partitions)
            return offsets
        return list(await asyncio.gather(*(self.applied(partition) for partition in partitions)))

    def waiting(self, unavailable: bool) -> None:
        """Say whether the projection waits for its store (the flag the watchdog reads, and the gauge)."""
        self.unavailable = unavailable
        if self._metrics is not None:
            self._metrics.unavailable.labels(self.name).set(1 if unavailable else 0)

    async def handle(self, records: Sequence[Record]) -> None:
        """Apply a batch in log order; poison records are dead-lettered where they stand.

        With a sealer, the batch is one of its `batch`es: an erasure in this process waits for it (it
        may hold records opened with the erased key) and then deletes what it wrote.
        """
        self.batch_started = time.monotonic()
        try:
            with applying(self.name, self.source_topic, records):
                if self._sealer is None:
                    await self.apply(records, await self.read(records))
                    return
                async with self._sealer.batch():
                    await self.apply(records, await self.read(records))
        finally:
            self.batch_started = None

    async def read(self, records: Sequence[Record]) -> list[Read]:
        """Each record decoded, opened and validated as an event, or why it is not one.

        Sealed records are opened with one key-vault round trip per batch. A record whose subject
        was erased (its data key is gone) reads as `Erased`: it is not poison, it is shredded.
        What this returns depends only on the records, so projections of one topic may share it:
        with `shared`, a record another projection of this process read already is not read again.
        """
        shared = self._shared
        if shared is None:
            return [read for read, _ in await self._read_keyed(records)]
        if self.name in shared.first and shared.reading.locked():
            # what the next turn reads does not queue behind another projection's read and its vault
            # round trips: it reads for itself meanwhile, taking only what needs no vault check
            return await self._read_sharing(shared, records, None)
        async with shared.reading:
            return await self._read_sharing(shared, records, self._sealer)

    async def _read_sharing(self, shared: SharedReads, records: Sequence[Record], sealer: Sealer | None) -> list[Read]:
        """`read` through `shared`: what another projection read is taken (a sealed record only with `sealer`,
        to check its key), the rest is read and kept for the others."""
        known = await shared.take(self.name, records, sealer)
        missing = [record for record, read in zip(records, known, strict=True) if read is None]
        fresh = iter(await self._read_keyed(missing) if missing else ())
        out: list[Read] = []
        for record, taken in zip(records, known, strict=True):
            if taken is not None:
                out.append(taken)
                continue
            read, key_id = next(fresh)
            shared.keep(self.name, record, read, key_id)
            out.append(read)
        return out

    async def _read_keyed(self, records: Sequence[Record]) -> list[tuple[Read, str | None]]:
        """`read`'s answer for each record, with the data key id an opened record was opened with."""
        decoded: list[Decoded | Exception] = []
        for record in records:
            try:
                decoded.append(self._codec.decode(record.value))
            except DecodeError as exc:
                decoded.append(exc)
        out: list[tuple[Read, str | None]] = []
        for index, item in enumerate(await self._open(decoded)):
            if isinstance(item, Shredded):
                env = cast(Decoded, decoded[index]).record["envelope"]
                period = item.period if isinstance(item, PeriodShredded) else None
                out.append((Erased(str(env["tenant"]), str(env["subject"]), period), None))
            elif isinstance(item, Exception):
                out.append((item, None))
            else:
                try:
                    event = from_record(item[0], item[1])
                except (DecodeError, InvalidEvent, KeyError, TypeError, ValueError) as exc:
                    out.append((exc, None))
                else:
                    out.append((event, sealed_key_id(cast(Decoded, decoded[index]).record)))
        return out

    async def apply(self, records: Sequence[Record], read: Sequence[Read]) -> None:
        """Apply what `read` made of `records`, in log order; poison is dead-lettered where it stands."""
        run: list[tuple[E, Position]] = []
        shredded: list[tuple[Event, Position]] = []
        expired = 0
        size = 0  # bytes of the records in `run`
        for record, item in zip(records, read, strict=True):
            position = Position(self.topic, record.partition, record.offset)
            if size >= APPLY_STEP_BYTES:
                await self._apply(run)
                run, size = [], 0
            if isinstance(item, Erased):
                shredded.append((cast(Event, None), position))
                who = (item.tenant, item.subject)
                counts = self.shredded_by if item.period is None else self.expired_by
                counts[who] = counts.get(who, 0) + 1
                expired += item.period is not None
                continue
            if isinstance(item, Exception):
                error: Exception | None = item
            elif not isinstance(item, self._accepts):
                error = InvalidEvent("event_type", f"{item.TYPE} does not belong on {self.source_topic}")
            else:
                error = None
            if error is not None:
                await self._apply(run)
                run = []
                await self._retrying(partial(self._dead_letter, position, record, error))
                continue
            run.append((cast(E, item), position))
            size += len(record.value or b"")
        await self._apply(run)
        if shredded:
            await self._retrying(partial(advance_past, self._checkpoints, shredded))
            if self._metrics is not None:
                self._metrics.shredded.labels(self.name).inc(len(shredded) - expired)
                self._metrics.expired.labels(self.name).inc(expired)

    async def _open(
        self, decoded: list[Decoded | Exception]
    ) -> list[tuple[str, dict[str, Any]] | Shredded | Exception]:
        sealed: list[tuple[str, dict[str, Any]]] = []
        is_sealed: list[bool] = []  # looked up once per record
        for d in decoded:
            if isinstance(d, Decoded) and sealed_key_id(d.record):
                sealed.append((d.full_name, d.record))
                is_sealed.append(True)
            else:
                is_sealed.append(False)
        results: list[dict[str, Any] | Shredded | DecodeError] = []
        if sealed:
            if self._sealer is None:
                results = [DecodeError("a sealed event, and this projection has no key vault") for _ in sealed]
            else:
                sealer = self._sealer

                async def open_all() -> None:
                    results.clear()
                    results.extend(await sealer.open_many(sealed))

                await self._retrying(open_all)
        opened = iter(results)
        out: list[tuple[str, dict[str, Any]] | Shredded | Exception] = []
        for item, seals in zip(decoded, is_sealed, strict=True):
            if isinstance(item, Exception):
                out.append(item)
            elif seals:
                result = next(opened)
                out.append(result if isinstance(result, Exception) else (item.full_name, result))
            else:
                out.append((item.full_name, item.record))
        return out

    async def _apply(self, run: list[tuple[E, Position]]) -> None:
        if not run:
            return
        try:
            await self._retrying(partial(self._step, run))
            if self._metrics is not None:
                self._metrics.applied.labels(self.name).inc(len(run))
        except Exception:
            if len(run) == 1:
                raise
            # Find the record that fails, one at a time; the others still land.
            for item in run:
                await self._apply_one(item)

    async def _apply_one(self, item: tuple[E, Position]) -> None:
        event, position = item
        try:
            await self._retrying(partial(self._step, [item]))
            if self._metrics is not None:
                self._metrics.applied.labels(self.name).inc()
        except Exception as exc:
            # Faust acks a record whose handler raised, so it would be lost; keep it in the dead-letter topic.
            log.exception("%s: applying %s failed", self.name, position.token())
            record = Record(position.partition, position.offset, None, None)
            await self._retrying(partial(self._dead_letter, position, record, exc, event.TYPE))

    async def _dead_letter(self, position: Position, record: Record, error: Exception, kind: str = "") -> None:
        letter = {
            "source_topic": self.source_topic,
            "source_partition": position.partition,
            "source_offset": position.offset,
            "key": record.key,
            "value": record.value,
            "error": f"{type(error).__name__}: {error}" + (f" (applying {kind})" if kind else ""),
            "consumer": self.name,
            "failed_at": now_ms(),
        }
        await self._dead_letters.send(record.key, self._codec.encode("memlog.DeadLetter", letter))
        await self._counter.count_dead_letter(self.source_topic)
        await self._checkpoints.advance(position)
        if self._metrics is not None:
            self._metrics.dead_letters.labels(self.name, self.source_topic).inc()
        log.warning(
            "%s: %s at %s sent to the dead-letter topic: %s", self.name, self.source_topic, position.token(), error
        )

    async def _retrying(self, step: Callable[[], Awaitable[None]]) -> None:
        delay = RETRY_FIRST_SECONDS
        started = time.monotonic()
        while True:
            try:
                await step()
                if delay > RETRY_FIRST_SECONDS:
                    log.info("%s: available again after %.0fs", self.name, time.monotonic() - started)
                if self.unavailable:  # set here, or while a rebalance waited for its checkpoints
                    self.waiting(False)
                return
            except (StoreUnavailable, LogUnavailable) as exc:
                self.waiting(True)
                log.warning(
                    "%s: unavailable for %.0fs, retrying in %.1fs: %s",
                    self.name,
                    time.monotonic() - started,
                    delay,
                    exc,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)
