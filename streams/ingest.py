"""The ingest topic (`<prefix>.ingest`): where a producer that holds no master key (a Java or Go backend
with only Kafka and schema-registry credentials) sends memlog's events unsealed. The worker seals each
onto the log under its subject's data key, then deletes what it sealed from the ingest topic
(DeleteRecords up to the committed offset), so the plaintext stays there only until the worker has
sealed it; the topic's short retention (MEMLOG_INGEST_RETENTION_SECONDS, 1 h) is the bound when no
worker runs. A record whose subject was erased after it was sent is dropped, never sealed under a new key.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.errors import KafkaError

from memlog.adapters.connections import kafka_options
from memlog.config.settings import Settings
from projections.ports import Ledger
from schemas.codec import Codec
from schemas.errors import DecodeError, InvalidEvent, LogUnavailable, StoreUnavailable
from schemas.events import PRIVACY_EVENTS, Event, from_record, record_key
from streams.producer import EventProducer, topic_of

log = logging.getLogger(__name__)
INGEST_GROUP_SUFFIX = "-ingest"
POLL_MS = 200
MAX_RECORDS = 500

DeadLetter = Callable[[bytes | None, bytes], Awaitable[None]]


def ingest_topic(settings: Settings) -> str:
    return settings.topic("ingest")


class IngestSealer:
    """Args:
    settings: the topic, group and Kafka connection.
    codec: decodes what producers sent (single-object encoding or the registry's wire format).
    producer: seals and produces onto the log, as the API's producer does.
    ledger: whose erasure came after a record was sent.
    dead_letter: where a record that can never be sealed goes (raw key and value).
    """

    def __init__(
        self, settings: Settings, codec: Codec, producer: EventProducer, ledger: Ledger, dead_letter: DeadLetter
    ) -> None:
        self._settings = settings
        self._codec = codec
        self._producer = producer
        self._ledger = ledger
        self._dead_letter = dead_letter
        self._consumer: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self.sealed = 0
        self.dropped = 0

    async def start(self) -> None:
        options = kafka_options(self._settings)
        self._consumer = AIOKafkaConsumer(
            ingest_topic(self._settings),
            group_id=self._settings.group_id + INGEST_GROUP_SUFFIX,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **options,
        )
        self._admin = AIOKafkaAdminClient(**options)
        await self._consumer.start()
        await self._admin.start()

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
        if self._admin is not None:
            await self._admin.close()

    async def drain(self) -> int:
        """One pass: what the ingest topic holds now, sealed onto the log, committed and deleted there."""
        assert self._consumer is not None and self._admin is not None, "start() first"
        try:
            batches = await self._consumer.getmany(timeout_ms=POLL_MS, max_records=MAX_RECORDS)
        except KafkaError as exc:
            raise LogUnavailable(f"ingest topic unreadable: {exc}") from exc
        done: dict[TopicPartition, int] = {}
        for partition, records in batches.items():
            await self._seal(records)
            done[partition] = records[-1].offset + 1
        if done:
            try:
                await self._consumer.commit(done)
                await self._admin.delete_records({tp: RecordsToDelete(offset) for tp, offset in done.items()})
            except KafkaError as exc:
                raise LogUnavailable(f"ingest offsets not committed: {exc}") from exc
        return sum(len(records) for records in batches.values())

    async def _seal(self, records: list[Any]) -> None:
        """In order, consecutive events of one thread owner and topic produced as one batch."""
        pending: list[Event] = []
        for record in records:
            event = await self._event(record)
            if event is None:
                continue
            if pending and not _together(pending[-1], event):
                await self._produce(pending)
                pending = []
            pending.append(event)
        if pending:
            await self._produce(pending)

    async def _produce(self, events: list[Event]) -> None:
        await self._producer.produce(events)
        self.sealed += len(events)

    async def _event(self, record: Any) -> Event | None:
        try:
            decoded = self._codec.decode(record.value)
            event = from_record(decoded.full_name, decoded.record)
            if isinstance(event, PRIVACY_EVENTS):  # erasures and exports are an operator's, through the API
                raise InvalidEvent(decoded.full_name, "is not taken from the ingest topic")
        except (DecodeError, InvalidEvent, KeyError, TypeError, ValueError) as exc:
            log.warning(
                "ingest record %s/%d is not a memlog event, dead-lettered: %s", record.partition, record.offset, exc
            )
            await self._dead_letter(record.key, record.value)
            return None
        env = event.envelope
        if env.subject is not None and await self._erased_since(env.tenant, env.subject, record.timestamp):
            self.dropped += 1
            log.info(
                "ingest record %s/%d dropped: its subject was erased after it was sent", record.partition, record.offset
            )
            return None
        return event

    async def _erased_since(self, tenant: str, subject: str, sent_ms: int) -> bool:
        erased = await self._ledger.erased(tenant, subject)
        if erased is None:
            return False
        at = erased.get("at")
        return at is not None and int(at.timestamp() * 1000) >= sent_ms


def _together(last: Event, event: Event) -> bool:
    a, b = last.envelope, event.envelope
    return record_key(a.tenant, a.owner) == record_key(b.tenant, b.owner) and topic_of(last) == topic_of(event)


async def run_ingest(sealer: IngestSealer, retry_seconds: float = 1.0) -> None:
    """Drain the ingest topic until cancelled; an outage of Kafka or a store is waited out, its records
    left where they are (uncommitted) for the next pass."""
    started = False
    try:
        while True:
            try:
                if not started:
                    await sealer.start()
                    started = True
                if not await sealer.drain():
                    continue
            except (LogUnavailable, StoreUnavailable, KafkaError) as exc:
                log.warning("ingest paused: %s", exc)
                await asyncio.sleep(retry_seconds)
    finally:
        if started:
            await sealer.stop()


def ingest_on(app: Any, sealer: IngestSealer) -> None:
    """A Faust app's task sealing the ingest topic for as long as the app runs."""

    @app.task  # type: ignore[untyped-decorator]
    async def seal_ingest() -> None:
        await run_ingest(sealer)
