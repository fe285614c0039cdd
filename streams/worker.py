"""`memlog worker`: the Faust worker that runs every projection agent."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import faust
import redis.asyncio as aioredis

from memlog.embeddings import make_embedder
from memlog.metrics import Metrics
from memlog.services import make_codec
from memlog.settings import Settings
from projections.mongo_archives import MongoConversationArchive
from projections.mongo_store import (
    MongoArchiveStore,
    MongoCheckpoints,
    MongoFactStore,
    MongoTraceStore,
    mongo_client,
)
from projections.redis_store import RedisCounters, RedisSessionStore
from projections.stores import Checkpoints
from projections.tokens import TokenCounter, load_encoding
from schemas.events import FACT_EVENTS, THREAD_EVENTS, TRACE_EVENTS, FactEvent, RunTraced, ThreadEvent
from streams.agents.archive import ArchiveStep
from streams.agents.facts import FactActivityStep, FactStep
from streams.agents.sessions import SessionStep
from streams.agents.traces import TraceStep
from streams.app import create_app
from streams.folds import FoldScheduler, FoldService
from streams.producer import EventProducer
from streams.projector import Projector, Record, Step
from streams.summarizers import make_summarizer
from streams.topics import ensure_topics

log = logging.getLogger(__name__)


class FaustDeadLetters:
    """The dead-letter topic, written through the app's producer; returns once the broker has it."""

    def __init__(self, topic: Any) -> None:
        self._topic = topic

    async def send(self, key: bytes | None, value: bytes) -> None:
        pending = await self._topic.send(key=key, value=value)
        await pending


def subscribe(app: faust.App, topic: Any, projector: Projector[Any], settings: Settings) -> None:
    """One agent per projection. Faust acks a batch when the loop asks for the next one, after the store write."""

    async def project(stream: Any) -> None:
        async for events in stream.take_events(settings.batch_size, within=settings.batch_seconds):
            await projector.handle(
                [Record(e.message.partition, e.message.offset, e.message.key, e.message.value) for e in events]
            )

    app.agent(topic, name=f"{app.conf.id}.{projector.name}")(project)


def build_worker(settings: Settings) -> tuple[faust.App, Callable[[], Awaitable[None]]]:
    """The app with its agents, and what to prepare before it starts (indexes).

    Clients connect lazily, inside the worker's event loop.
    """
    app = create_app(settings)
    codec = make_codec(settings)
    metrics = Metrics()
    redis = aioredis.Redis.from_url(settings.redis, socket_timeout=10, socket_connect_timeout=5)
    database = mongo_client(settings.mongo)[settings.mongo_db_name]
    counters = RedisCounters(redis, settings.redis_prefix)
    threads = app.topic(
        settings.threads_topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    dead_letters = FaustDeadLetters(
        app.topic(
            settings.deadletter_topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
        )
    )
    sessions = RedisSessionStore(redis, settings.redis_prefix)
    archive = MongoArchiveStore(database)
    archive_checkpoints = MongoCheckpoints(database, "archive")
    conversations = MongoConversationArchive(database)
    count_tokens = TokenCounter(load_encoding(settings.tokenizer, settings.tokenizer_file))

    def projector(name: str, step: Step[ThreadEvent], checkpoints: Checkpoints) -> Projector[ThreadEvent]:
        return Projector(
            name=name,
            topic="threads",
            source_topic=settings.threads_topic,
            codec=codec,
            accepts=THREAD_EVENTS,
            step=step,
            checkpoints=checkpoints,
            dead_letters=dead_letters,
            counter=counters,
            metrics=metrics,
        )

    facts_topic = app.topic(
        settings.topic("facts"), key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    facts = MongoFactStore(database)
    fact_policy = settings.fact_policy()
    facts_projector: Projector[FactEvent] = Projector(
        name="facts",
        topic="facts",
        source_topic=settings.topic("facts"),
        codec=codec,
        accepts=FACT_EVENTS,
        step=FactStep(facts, fact_policy, make_embedder(settings)),
        checkpoints=facts,
        dead_letters=dead_letters,
        counter=counters,
        metrics=metrics,
    )
    subscribe(app, facts_topic, facts_projector, settings)
    traces_topic = app.topic(
        settings.topic("traces"), key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    traces = MongoTraceStore(database)
    traces_projector: Projector[RunTraced] = Projector(
        name="traces",
        topic="traces",
        source_topic=settings.topic("traces"),
        codec=codec,
        accepts=TRACE_EVENTS,
        step=TraceStep(traces, settings.redactor(), settings.trace_days),
        checkpoints=traces,
        dead_letters=dead_letters,
        counter=counters,
        metrics=metrics,
    )
    subscribe(app, traces_topic, traces_projector, settings)
    activity_checkpoints = MongoCheckpoints(database, "facts-activity")
    activity = FactActivityStep(facts, activity_checkpoints, fact_policy)
    subscribe(app, threads, projector("facts-activity", activity, activity_checkpoints), settings)

    producer = EventProducer(settings, codec, idempotence=settings.idempotent_producer)
    folds = FoldScheduler(
        FoldService(
            sessions, producer, make_summarizer(settings), settings.thread_policy(), settings.producer_name, metrics
        ),
        settings.fold_retry_seconds,
    )
    step = SessionStep(
        sessions,
        policy=settings.thread_policy(),
        count_tokens=count_tokens,
        request_fold=folds.request if settings.fold_agent else None,
    )
    subscribe(app, threads, projector("sessions", step, sessions), settings)
    subscribe(
        app,
        threads,
        projector(
            "archive",
            ArchiveStep(archive, archive_checkpoints, conversations, fork_entries=settings.fork_entries),
            archive_checkpoints,
        ),
        settings,
    )

    async def prepare() -> None:
        await archive.prepare()
        await conversations.prepare()
        await facts.prepare()
        await traces.prepare()
        await producer.start()
        if settings.worker_metrics_port is not None:
            metrics.serve(settings.worker_metrics_port, settings.metrics_host)

    return app, prepare


def run_worker(settings: Settings) -> None:
    """Create missing topics, then run the worker until SIGTERM or Ctrl-C."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(ensure_topics(settings))
    app, prepare = build_worker(settings)
    loop.run_until_complete(prepare())
    worker = faust.Worker(app, loop=loop, loglevel="INFO", quiet=True)
    worker.execute_from_commandline()
