"""The producer backends import to record events straight onto Kafka (the HTTP API uses it too)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    InvalidProducerEpoch,
    InvalidTimestampError,
    KafkaError,
    KafkaTimeoutError,
    OutOfOrderSequenceNumber,
    UnknownProducerId,
)
from aiokafka.partitioner import DefaultPartitioner
from opentelemetry.trace import SpanKind

from memlog.adapters.connections import kafka_options
from memlog.config.settings import Settings
from projections.position import Position
from projections.redaction import Redactor
from projections.traces import redact_run, sampled
from schemas.codec import Codec
from schemas.errors import InvalidEvent, LogUnavailable
from schemas.events import (
    FACT_EVENTS,
    PRIVACY_EVENTS,
    TRACE_EVENTS,
    Event,
    RunTraced,
    now_ms,
    record_key,
    to_record,
)
from schemas.exchanges import OFF_LOOP_CHARS, ReportedExchange, exchange_events, text_size
from schemas.session_text import TokenCount
from streams.sealer import Sealer, Who
from streams.tracing import trace_headers, tracer

log = logging.getLogger(__name__)

# After a broker restart an idempotent aiokafka producer can lose its place in the broker's sequence
# (OutOfOrderSequenceNumber on every later send, found in tests/test_faults.py); it never recovers by
# itself, so the producer is replaced by a new one, with a new producer id.
BROKEN_PRODUCER = (OutOfOrderSequenceNumber, UnknownProducerId, InvalidProducerEpoch, KafkaTimeoutError)
REQUEST_TIMEOUT_MS = 15_000
# Kafka refuses timestamps further ahead than message.timestamp.after.max.ms (1 h by default).
MAX_FUTURE_MS = 3_600_000
# A send normally fails by itself within the request timeout; across a broker restart an idempotent
# producer has also been seen to leave a send waiting for good (tests/test_faults.py). Past this
# deadline the send counts as failed, and its producer as broken.
SEND_DEADLINE_SECONDS = 2 * REQUEST_TIMEOUT_MS / 1000
STOP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Recorded:
    exchange_id: str
    position: Position  # of the exchange's last event


def topic_of(event: Event) -> str:
    if isinstance(event, FACT_EVENTS):
        return "facts"
    if isinstance(event, TRACE_EVENTS):
        return "traces"
    if isinstance(event, PRIVACY_EVENTS):
        return "privacy"
    return "threads"


class EventProducer:
    """Validates, encodes and produces memlog events.

    Args:
        settings: bootstrap servers, topic names and size limits come from here.
        codec: encodes events (single-object encoding, or Confluent with a registry).
        idempotence: Kafka's idempotent producer; off for brokers without it (Tansu).
        sealer: encrypts the personal fields of subject events with the subject's data key.
    """

    def __init__(
        self,
        settings: Settings,
        codec: Codec,
        *,
        sealer: Sealer,
        idempotence: bool = True,
        count_tokens: TokenCount | None = None,
    ) -> None:
        """`count_tokens`: the session's tokenizer; exchange events built here carry their text's count."""
        self._settings = settings
        self.count_tokens = count_tokens
        self._codec = codec
        self._sealer = sealer
        self._idempotence = idempotence
        self._partitioner = DefaultPartitioner()
        self._kafka: AIOKafkaProducer | None = None
        self._renewing = asyncio.Lock()
        self.renewals = 0

    @property
    def _producer(self) -> AIOKafkaProducer:
        if self._kafka is None:
            raise LogUnavailable("the producer is not started")
        return self._kafka

    async def _connect(self) -> AIOKafkaProducer:
        kafka = AIOKafkaProducer(
            **kafka_options(self._settings),
            acks="all",
            enable_idempotence=self._idempotence,
            max_request_size=self._settings.max_message_bytes,
            max_batch_size=self._settings.max_message_bytes,
            linger_ms=2,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )
        try:
            await kafka.start()
        except KafkaError as exc:
            await kafka.stop()
            raise LogUnavailable(f"kafka at {self._settings.bootstrap}: {exc}") from exc
        return kafka

    async def start(self) -> None:
        """Connect; the client is made here because it belongs to the running event loop."""
        self._kafka = await self._connect()

    async def _renew(self, broken: AIOKafkaProducer, error: KafkaError) -> None:
        """Replace a producer that cannot recover (once, however many sends saw it fail)."""
        async with self._renewing:
            if id(self._kafka) != id(broken):  # another send replaced it already
                return
            self._kafka = await self._connect()  # raises LogUnavailable while the broker is still away
            self.renewals += 1
            log.warning("replaced the Kafka producer after %s: %s", type(error).__name__, error)
        try:
            await asyncio.wait_for(broken.stop(), STOP_TIMEOUT_SECONDS)
        except (KafkaError, TimeoutError) as exc:
            log.info("the replaced producer stopped with %s", type(exc).__name__)

    async def stop(self) -> None:
        if self._kafka is not None:
            await self._kafka.stop()

    async def __aenter__(self) -> EventProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def pin(self, tenant: str, subject: str | None) -> tuple[str, bytes] | None:
        """The key events about `subject` are sealed with now (this period's), to seal something derived from data read
        after this call (see `Sealer.seal`); None when the subject has none (erased). The tenant's own
        key (no subject) is made when missing. Raises SubjectErasing while the subject is being erased."""
        if subject is None:
            return await self._sealer.key_for_write(tenant, None)
        return await self._sealer.key_in_use(tenant, subject, int(time.time() * 1000))  # this period's key

    async def record_exchange(self, exchange: ReportedExchange | Mapping[str, Any]) -> Recorded:
        """Record a whole exchange: question, tool calls and answer, in one batch on one partition.

        Backends may pass the exchange as a plain dict, shaped like the body of POST /v1/exchanges.
        """
        if not isinstance(exchange, ReportedExchange):
            exchange = ReportedExchange.from_payload(exchange)
        name, count = self._settings.producer_name, self.count_tokens
        if count is not None and text_size(exchange) > OFF_LOOP_CHARS:  # counting would hold the event loop
            events = await asyncio.to_thread(exchange_events, exchange, producer=name, count_tokens=count)
        else:
            events = exchange_events(exchange, producer=name, count_tokens=count)
        position = await self.produce(list(events))
        return Recorded(events[0].exchange_id, position)

    async def record_run(self, run: RunTraced, redactor: Redactor) -> tuple[Position, int] | None:
        """Trace a run: sampled by run id (None when left out), redacted, refused whole when too large.

        Returns the run's position and its encoded size.
        """
        if not sampled(run.run_id, self._settings.trace_sample):
            return None
        # Redacting and encoding a run of up to 768 KiB is CPU work: done in a worker thread, so the event loop
        # (every other request, /healthz included) is not held while it runs.
        clean, size = await asyncio.to_thread(self._redacted, run, redactor)
        if size > self._settings.trace_max_bytes:
            raise InvalidEvent("body", f"the run is {size} bytes encoded; at most {self._settings.trace_max_bytes}")
        return await self.produce([clean]), size

    def _redacted(self, run: RunTraced, redactor: Redactor) -> tuple[RunTraced, int]:
        clean = redact_run(run, redactor)
        return clean, len(self._codec.encode(clean.TYPE, to_record(clean)))

    async def produce(
        self, events: Sequence[Event], *, pinned: Mapping[Who, tuple[str, bytes]] | None = None
    ) -> Position:
        """Produce events of one thread in order, atomically as one batch; returns the last one's position.

        `pinned`: keys taken before the events' content was read, by (tenant, subject), to seal with
        instead of the current ones (see `Sealer.seal`).
        """
        if not events:
            raise InvalidEvent("events", "nothing to produce")
        first = events[0].envelope
        latest = max(e.envelope.occurred_at for e in events)
        if latest > now_ms() + MAX_FUTURE_MS:
            raise InvalidEvent("occurred_at", f"{latest} is more than an hour ahead of this clock")
        key = record_key(first.tenant, first.owner)
        if any(record_key(e.envelope.tenant, e.envelope.owner) != key for e in events):
            raise InvalidEvent("events", "a batch must belong to one thread owner")
        values = [self._codec.encode(e.TYPE, await self._sealer.seal(e.TYPE, to_record(e), pinned)) for e in events]
        size = sum(len(value) for value in values)
        if size > self._settings.max_message_bytes:
            raise InvalidEvent("body", f"encodes to {size} bytes; at most {self._settings.max_message_bytes}")
        short = topic_of(events[0])
        if any(topic_of(e) != short for e in events):
            raise InvalidEvent("events", "a batch goes to one topic: thread, fact and trace events apart")
        topic = self._settings.topic(short)
        kafka = self._producer
        span = tracer().start_span(f"produce {topic}", kind=SpanKind.PRODUCER)
        span.set_attribute("messaging.destination.name", topic)
        headers = trace_headers(span)
        try:
            async with asyncio.timeout(SEND_DEADLINE_SECONDS):
                partitions = sorted(await kafka.partitions_for(topic))
                partition = self._partitioner(key, partitions, partitions)
                batch = kafka.create_batch()
                for value in values:
                    if batch.append(key=key, value=value, timestamp=first.occurred_at, headers=headers) is None:
                        raise InvalidEvent(
                            "events",
                            f"the exchange does not fit one batch of {self._settings.max_message_bytes} bytes",
                        )
                batch.close()  # complete: sent at once, not after the producer's linger (2.5 ms of a POST's 10)
                future = await kafka.send_batch(batch, topic, partition=partition)
                meta = await future
        except TimeoutError as exc:
            await self._renew(kafka, KafkaTimeoutError(f"no answer in {SEND_DEADLINE_SECONDS:.0f}s"))
            raise LogUnavailable(f"kafka did not take {topic} in {SEND_DEADLINE_SECONDS:.0f}s") from exc
        except InvalidTimestampError as exc:
            await self._renew(kafka, exc)  # the refused batch used up a sequence number
            raise InvalidEvent("occurred_at", f"{first.occurred_at} is outside what the broker accepts: {exc}") from exc
        except KafkaError as exc:
            if isinstance(exc, BROKEN_PRODUCER):
                await self._renew(kafka, exc)
            raise LogUnavailable(f"kafka refused {topic}: {exc}") from exc
        finally:
            span.end()
        return Position(short, meta.partition, meta.offset + len(values) - 1)
