"""`memlog worker`: the Faust worker that runs every projection agent.

The projections themselves are built by `streams.projectors.build_projections`, which `memlog replay`
shares: a replay runs the very same projectors, fed in large batches by a plain consumer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import faust
from aiokafka.errors import KafkaError

from memlog.adapters.summarizers import make_summarizer
from memlog.adapters.wiring import Backends, OpenBackends, PrivacyStores, database_names
from memlog.config.settings import Settings
from projections.stores import Stores
from schemas.codec import Codec
from schemas.errors import LogUnavailable, StoreUnavailable
from schemas.events import PRIVACY_EVENTS
from streams import shutdown
from streams.app import create_app
from streams.batches import ready_batches
from streams.compaction import compact_on_timer, compact_storage
from streams.consumer import FaustConsumer
from streams.faults import FaultHooks
from streams.folds import FoldScheduler, FoldService
from streams.ingest import IngestSealer, ingest_on
from streams.metrics import Metrics
from streams.name_clash import NameClash
from streams.namespaces import Namespaces, drop_on_timer
from streams.period_keys import shred_periods_on_timer
from streams.positions import LogPositions
from streams.producer import EventProducer
from streams.projector import DeadLetterSink, Projector, Record
from streams.projectors import PROJECTIONS, build_projections
from streams.resume import ResumeFromCheckpoints
from streams.retention import retention_on_timer
from streams.sealer import Sealer
from streams.steps.privacy import PrivacyStep, SubjectData
from streams.topics import apply_deadletter_retention, check_retention, ensure_topics
from streams.tracing import setup_tracing
from streams.watchdog import Watchdog

log = logging.getLogger(__name__)


class FaustDeadLetters:
    """The dead-letter topic, written through the app's producer; returns once the broker has it."""

    def __init__(self, topic: Any) -> None:
        self._topic = topic

    async def send(self, key: bytes | None, value: bytes) -> None:
        try:
            pending = await self._topic.send(key=key, value=value)
            await pending
        except KafkaError as exc:  # the projector retries it, as it retries a store outage
            raise LogUnavailable(f"kafka refused the dead letter: {exc}") from exc


def subscribe(
    app: faust.App, topic: Any, projector: Projector[Any], settings: Settings, faults: FaultHooks | None = None
) -> None:
    """One agent per projection. A batch is acked when the loop asks for the next one, after the store write."""

    async def project(stream: Any) -> None:
        async for events in batches(stream, projector.name, settings):
            if faults is not None:
                await faults.before_batch()
            await projector.handle(
                [
                    Record(e.message.partition, e.message.offset, e.message.key, e.message.value, _headers(e.message))
                    for e in events
                ]
            )

    app.agent(topic, name=f"{app.conf.id}.{projector.name}")(project)


FIRST = ("sessions", "facts")  # what the next turn reads: batches handed over as soon as nothing more is queued


def batches(stream: Any, projection: str, settings: Settings) -> AsyncIterator[Sequence[Any]]:
    """The agent's batches: at once for what the next turn reads (MEMLOG_SESSIONS_BATCH_SECONDS 0), else
    gathered for MEMLOG_BATCH_SECONDS (or the sessions' window when one is set) from the batch's first
    event; no timer runs while the agent is idle (streams/batches.py)."""
    within = settings.sessions_batch_seconds if projection in FIRST else settings.batch_seconds
    return ready_batches(stream, settings.batch_size, within)


def _headers(message: Any) -> tuple[tuple[str, bytes], ...]:
    """A Faust message's headers as (name, bytes) pairs (Faust gives a list of pairs or a mapping)."""
    headers = message.headers or ()
    pairs = headers.items() if isinstance(headers, dict) else headers
    return tuple((str(name), bytes(value)) for name, value in pairs if value is not None)


@dataclass
class WorkerParts:
    """The app with its agents and watchdog, what to prepare before it starts, and its fault hooks if any."""

    app: faust.App
    prepare: Callable[[], Awaitable[None]]
    faults: FaultHooks | None


def run_watchdog(
    app: faust.App,
    consumer: FaustConsumer,
    projectors: list[Projector[Any]],
    metrics: Metrics,
    settings: Settings,
    give_up: Callable[[int], None],
) -> Watchdog:
    """The worker's watchdog, one of the app's tasks; it reads the log's end with a client of its own."""
    log_positions = LogPositions(settings)
    watchdog = Watchdog(
        projectors=projectors,
        consumer=consumer,
        ends=log_positions,
        metrics=metrics,
        seconds=settings.watchdog_seconds,
        give_up=give_up,
        batch_seconds=settings.watchdog_batch_seconds,
    )
    app.task(watchdog.run)

    @app.on_before_shutdown.connect
    async def close_log_positions(*_: Any, **__: Any) -> None:
        await log_positions.stop()

    return watchdog


def privacy_projector(
    settings: Settings,
    codec: Codec,
    stores: Stores,
    shared: PrivacyStores,
    sealer: Sealer,
    namespaces: Namespaces,
    dead_letters: DeadLetterSink,
    metrics: Metrics,
) -> Projector[Any]:
    """The privacy agent's projector: erasure and export requests, across every store of the subject."""
    data = SubjectData.of(
        stores,
        exports=shared.exports,
        vault=shared.vault,
        ledger=shared.ledger,
        sealer=sealer,
        others=lambda: namespaces.others(settings.namespace),
    )
    return Projector(
        name="privacy",
        topic="privacy",
        source_topic=settings.topic("privacy"),
        codec=codec,
        accepts=PRIVACY_EVENTS,
        step=PrivacyStep(data, stores.privacy_checkpoints, metrics),
        checkpoints=stores.privacy_checkpoints,
        dead_letters=dead_letters,
        counter=stores.counters,
        metrics=metrics,
        sealer=sealer,
    )


def build_worker(settings: Settings, backends: Backends, give_up: Callable[[int], None]) -> WorkerParts:
    """The app with its agents and watchdog, which calls `give_up` with an exit code when it finds the worker stuck.

    `settings.namespace` is where it writes; `backends.settings` are the configured settings (the API's
    idempotency claims and the namespace pointer are keyed by them). The clients are the root's
    (`backends`); they connect lazily, in the worker's event loop.
    """
    base = backends.settings
    app = create_app(settings)
    consumer = FaustConsumer(app)
    faults = FaultHooks(consumer) if settings.worker_fault_signals else None
    codec = backends.codec
    metrics = Metrics()
    redis, mongo = backends.redis, backends.mongo
    stores = backends.stores(settings.namespace)
    shared = backends.shared
    sealer = Sealer(shared.vault, settings.key_cache_seconds, settings.key_periods())

    def raw_topic(name: str) -> Any:
        return app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")

    dead_letters = FaustDeadLetters(raw_topic(settings.deadletter_topic))
    producer = EventProducer(settings, codec, sealer=sealer, idempotence=settings.idempotent_producer)
    sessions = stores.sessions
    folds = FoldScheduler(
        FoldService(
            sessions, producer, make_summarizer(settings), settings.thread_policy(), settings.producer_name, metrics
        ),
        settings.fold_retry_seconds,
    )
    built = build_projections(
        settings,
        codec=codec,
        sealer=sealer,
        stores=stores,
        dead_letters=dead_letters,
        metrics=metrics,
        which=tuple(name for name in settings.worker_set() if name in PROJECTIONS),
        request_fold=folds.request if settings.fold_agent else None,
        share_reads=True,
    )
    topics = {name: raw_topic(settings.topic(name)) for name in ("threads", "facts", "traces", "privacy")}
    for short, projector in built.projectors:
        subscribe(app, topics[short], projector, settings, faults)
    namespaces = Namespaces(base, shared.pointer, shared.namespaces, backends.stores, partial(database_names, mongo))
    drop_on_timer(app, namespaces, settings.namespace_check_seconds)
    projectors = [projector for _, projector in built.projectors]
    if "privacy" in settings.worker_set():
        privacy = privacy_projector(settings, codec, stores, shared, sealer, namespaces, dead_letters, metrics)
        subscribe(app, topics["privacy"], privacy, settings, faults)
        projectors.append(privacy)
        # the privacy set runs in exactly one worker set: retention is scheduled there, not in every worker
        retention_on_timer(
            app,
            stores.conversations,
            producer,
            settings.producer_name,
            settings.retention_policy(),
            settings.retention_check_seconds,
            shared.ledger,
        )
        compact = partial(compact_storage, settings, mongo, redis, shared.namespaces)
        compact_on_timer(app, shared.ledger, compact, settings.compact_after_seconds, metrics)
        # the log forgets on schedule: the period keys that are due are shredded here, by no command
        shred_periods_on_timer(
            app, shared.vault, shared.ledger, settings.log_key_keep_ms(), settings.log_key_check_seconds, metrics
        )
    if "sessions" in settings.worker_set():  # the sessions' workers seal what the ingest topic holds
        ingest_on(app, IngestSealer(settings, codec, producer, shared.ledger, dead_letters.send))
    resume = ResumeFromCheckpoints(app, projectors)
    app.on_rebalance_complete.connect(resume)
    if settings.worker_instance is not None:
        NameClash(settings.worker_instance, restart_unnamed).watch()

    watchdog = run_watchdog(app, consumer, projectors, metrics, settings, give_up)

    @app.timer(interval=2.0)  # type: ignore[untyped-decorator]
    async def follow_pointer() -> None:
        """A replay that finished moved the pointer: start again in the new namespace (same pid)."""
        try:
            active = await shared.pointer.active() or base.namespace
        except StoreUnavailable as exc:  # MongoDB is away: keep going, look again on the next tick
            log.debug("namespace pointer unreadable: %s", exc)
            return
        if active != settings.namespace:
            log.warning("namespace switched from %s to %s: restarting in it", settings.namespace, active)
            os.execv(sys.executable, sys.orig_argv)

    async def prepare() -> None:
        await built.prepare()
        await shared.prepare()
        await namespaces.start()
        await producer.start()
        if settings.worker_metrics_port is not None:
            metrics.serve(settings.worker_metrics_port, settings.metrics_host, liveness=watchdog.liveness)

    return WorkerParts(app, prepare, faults)


def restart_unnamed() -> None:
    """This worker started again in place (same pid, same command) as a dynamic member of its group."""
    os.execve(sys.executable, sys.orig_argv, {**os.environ, "MEMLOG_WORKER_INSTANCE": ""})


def run_worker(settings: Settings, open_backends: OpenBackends) -> None:
    """Create missing topics, then run the worker in the active namespace until SIGTERM or Ctrl-C.

    It exits within MEMLOG_WORKER_STOP_SECONDS of SIGTERM (streams/shutdown.py), and with code 75
    when its watchdog finds it stuck (streams/watchdog.py). Its clients, for the process's life, are
    opened by `open_backends` on the configured settings (memlog.services.open_backends, which
    `memlog worker` hands it).
    """
    setup_tracing(settings, "worker")
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    backends = open_backends(settings)  # they connect on first use, in this loop
    loop.run_until_complete(ensure_topics(settings))
    loop.run_until_complete(check_retention(settings))
    loop.run_until_complete(apply_deadletter_retention(settings))
    namespace = loop.run_until_complete(backends.shared.pointer.active()) or settings.namespace
    scoped = settings.model_copy(update={"namespace": namespace})
    log.info("worker writes into namespace %s (consumer group %s)", namespace, scoped.group_id)
    deadline = shutdown.StopDeadline(settings.worker_stop_seconds)
    worker: shutdown.Worker | None = None

    def give_up(code: int) -> None:
        assert worker is not None, "the watchdog runs only once the worker does"
        worker.stop_with(code)

    parts = build_worker(scoped, backends, give_up)
    loop.run_until_complete(parts.prepare())
    worker = shutdown.Worker(parts.app, deadline=deadline, faults=parts.faults, loop=loop, loglevel="INFO", quiet=True)
    try:
        worker.execute_from_commandline()
    except SystemExit as done:
        if deadline.code:  # the watchdog's code, rather than the one of a stop that went well
            raise SystemExit(deadline.code) from done
        raise
