"""The composition root: opens the clients, stores and producer a process needs, and closes them.

`open_backends` is the one bootstrap: the only place that opens a process's clients of the stores (Redis,
MongoDB) and the stores over them (memlog.adapters.wiring). The API, the CLI and the MCP server get theirs
through `open_services`; the worker, `memlog compact` and replay (in its processes too) from their entry
points in the faces, which hand them `open_backends` or what it opened.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis.asyncio as aioredis
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from memlog.adapters import connections
from memlog.adapters.embeddings import QuestionEncoder, make_embedder
from memlog.adapters.redis_signals import AppliedSignals
from memlog.adapters.summarizers import make_summarizer
from memlog.adapters.wiring import Backends, PrivacyStores, make_codec, open_privacy
from memlog.app.claims import Claims
from memlog.app.context import ContextReads
from memlog.app.conversations import Conversations
from memlog.app.evidence import Evidence
from memlog.app.exchanges import Exchanges
from memlog.app.memory import Memory
from memlog.app.positions import Positions
from memlog.app.privacy import SubjectRequests
from memlog.app.ranker import Ranker
from memlog.app.readiness import ReadinessCheck
from memlog.app.receipts import Receipts
from memlog.app.replays import Replays
from memlog.app.runs import Runs
from memlog.app.search import CrossSearch
from memlog.config.settings import Settings
from projections.cursors import Cursors
from projections.engines import Summarizer
from projections.ports import (
    ArchiveSearch,
    Checkpoints,
    ConversationArchive,
    Counters,
    Exports,
    FactStore,
    Idempotency,
    KeyVault,
    Ledger,
    NamespacePointer,
    SessionStore,
    TraceStore,
)
from projections.redaction import Redactor
from projections.stores import Stores
from projections.tokens import TokenCounter, load_encoding
from schemas.codec import Codec
from streams.folds import FoldService
from streams.metrics import Metrics
from streams.namespaces import Namespaces
from streams.positions import LogPositions
from streams.producer import EventProducer
from streams.sealer import Sealer

T = TypeVar("T")
CLI_PRODUCER = "memlog-cli"  # the envelope's producer for what the CLI puts on the log


def open_backends(settings: Settings) -> Backends:
    """A process's clients of Redis and MongoDB (they connect on first use, in the loop that uses them),
    its codec, and the stores every namespace shares. The caller closes them (`Backends.close`)."""
    codec = make_codec(settings)
    redis = connections.redis_client(settings)
    mongo = connections.mongo(settings)
    return Backends(settings, codec, redis, mongo, open_privacy(settings, mongo))


@dataclass
class Services:
    settings: Settings
    backends: Backends
    sealer: Sealer
    current: Stores
    producer_name: str
    metrics: Metrics | None = None
    _producer: EventProducer | None = None
    _log: LogPositions | None = None
    ranker: Ranker = field(default_factory=Ranker)  # a search's ranking, in processes of its own (spawned at the first)
    _built: dict[tuple[str, str], Any] = field(default_factory=dict)

    @property
    def producer(self) -> EventProducer:
        assert self._producer is not None, "opened without a producer"
        return self._producer

    @property
    def codec(self) -> Codec:
        return self.backends.codec

    @property
    def redis(self) -> aioredis.Redis:
        return self.backends.redis

    @property
    def mongo(self) -> AsyncMongoClient[dict[str, Any]]:
        return self.backends.mongo

    # the stores every namespace shares
    @property
    def shared(self) -> PrivacyStores:
        return self.backends.shared

    @property
    def privacy(self) -> AsyncDatabase[dict[str, Any]]:
        return self.shared.database

    @property
    def vault(self) -> KeyVault:
        return self.shared.vault

    @property
    def ledger(self) -> Ledger:
        return self.shared.ledger

    @property
    def exports(self) -> Exports:
        return self.shared.exports

    @property
    def pointer(self) -> NamespacePointer:
        return self.shared.pointer

    # the current namespace's stores
    @property
    def database(self) -> AsyncDatabase[dict[str, Any]]:
        database: AsyncDatabase[dict[str, Any]] = self.current.database  # built by memlog.adapters.wiring.open_stores
        return database

    @property
    def sessions(self) -> SessionStore:
        return self.current.sessions

    @property
    def counters(self) -> Counters:
        return self.current.counters

    @property
    def archive_checkpoints(self) -> Checkpoints:
        return self.current.archive_checkpoints

    @property
    def facts(self) -> FactStore:
        return self.current.facts

    @property
    def fact_activity(self) -> Checkpoints:
        return self.current.fact_activity

    @property
    def traces(self) -> TraceStore:
        return self.current.traces

    @property
    def conversations(self) -> ConversationArchive:
        return self.current.conversations

    @property
    def idempotency(self) -> Idempotency:
        return self.current.idempotency

    @property
    def archive_search(self) -> ArchiveSearch:
        return self.current.archive_search

    # the use cases, built here once per namespace and shared by the API, the CLI and the MCP server
    def _use(self, name: str, build: Callable[[], T]) -> T:
        key = (name, self.current.namespace)
        if key not in self._built:
            self._built[key] = build()
        used: T = self._built[key]
        return used

    @property
    def embedder(self) -> QuestionEncoder | None:
        """The configured model behind the read path's question cache and shared encoder; None for keywords."""

        def build() -> QuestionEncoder | None:
            model = make_embedder(self.settings)
            return None if model is None else QuestionEncoder.from_settings(model, self.settings)

        return self._use_once("embedder", build)

    @property
    def summarizer(self) -> Summarizer:
        return self._use_once("summarizer", lambda: make_summarizer(self.settings))

    def _use_once(self, name: str, build: Callable[[], T]) -> T:
        """Models and clients that do not depend on the namespace: built on first use, kept."""
        if (name, "") not in self._built:
            self._built[(name, "")] = build()
        used: T = self._built[(name, "")]
        return used

    @property
    def memory(self) -> Memory:
        """Facts: remember / recall / forget, the subject's own commands (seeds 000, 003)."""
        return self._use(
            "memory",
            lambda: Memory(
                self.producer,
                self.facts,
                self.settings.fact_policy(),
                self.producer_name,
                self.embedder,
                slots=self.current.fact_slots,
                recall_policy=self.settings.recall_policy(),
                tenant_writers=self.settings.tenant_facts_from_agents,
                agents_forget_backend=self.settings.agents_forget_backend_knowledge,
                transcripts=self.sessions,
                cursors=self.cursors,
            ),
        )

    @property
    def folds(self) -> FoldService:
        return self._use(
            "folds",
            lambda: FoldService(
                self.sessions,
                self.producer,
                self.summarizer,
                self.settings.thread_policy(),
                self.producer_name,
                self.metrics,
            ),
        )

    def threads(self, *, read_only: bool = False) -> Conversations:
        """Conversation operations (seed 004); read-only where no producer was opened."""
        return self._use(
            "threads-read" if read_only else "threads",
            lambda: Conversations(
                self.conversations,
                None if read_only else self.producer,
                self.producer_name,
                self.settings.fork_entries,
                None if read_only else lambda: self.folds,
                claims=self.idempotency,
                archived=lambda position: self.positions.reached(position, 0, archive=True),
                evidence=self.evidence,
                search_candidates=self.settings.search_max_candidates,
                similar=self.current.similar,
                cursors=self.cursors,
                ledger=None if read_only else self.ledger,
                ranker=self.ranker,
                meaning_min=self.settings.search_meaning_min,
            ),
        )

    @property
    def evidence(self) -> Evidence:
        """Tool calls joined to the runs that served them, and their status (seed 004)."""
        timeout_ms = round(self.settings.tool_result_timeout_seconds * 1000)
        current = self.current
        return self._use("evidence", lambda: Evidence(self.traces, timeout_ms, current.receipts, current.conversations))

    @property
    def cross_search(self) -> CrossSearch:
        """Search across threads: an agent's over what it took part in, an operator's over a tenant (004)."""
        return self._use(
            "cross-search",
            lambda: CrossSearch(
                self.archive_search,
                self.conversations,
                self.archive_checkpoints,
                self.settings.search_max_candidates,
                similar=self.current.similar,
                cursors=self.cursors,
                ranker=self.ranker,
                meaning_min=self.settings.search_meaning_min,
            ),
        )

    @property
    def positions(self) -> Positions:
        """Read your writes, and the lag (where the process opened the log's positions)."""
        return self._use_once(
            "positions",
            lambda: Positions(
                self.settings, lambda: self.current, self._log, AppliedSignals(self.redis, self.settings.app_id)
            ),
        )

    @property
    def readiness(self) -> ReadinessCheck:
        """The lag report, and the projections that hold a lag without moving (kept across reports)."""
        return self._use_once("readiness", lambda: ReadinessCheck(self.settings, self.positions, self.metrics))

    @property
    def claims(self) -> Claims:
        """Idempotency keys of the writes other than exchanges (facts, tenant knowledge, tool runs)."""
        return self._use("claims", lambda: Claims(self.idempotency, self.settings.read_wait_seconds))

    @property
    def exchanges(self) -> Exchanges:
        return self._use(
            "exchanges",
            lambda: Exchanges(self.producer, self.producer_name, self.idempotency, self.settings.read_wait_seconds),
        )

    @property
    def contexts(self) -> ContextReads:
        return self._use(
            "contexts",
            lambda: ContextReads(
                self.sessions,
                self.folds,
                self.memory,
                self.positions,
                self.settings.thread_policy(),
                self.metrics,
                self.evidence,
                namespace=self.current.namespace,
            ),
        )

    @property
    def cursors(self) -> Cursors:
        """Signs the cursors every paged read hands out, under a key derived from the master key."""
        return self._use_once("cursors", lambda: Cursors.derived(self.settings.master_key_bytes()))

    @property
    def redactor(self) -> Redactor:
        return self._use_once("redactor", self.settings.redactor)

    @property
    def receipts(self) -> Receipts:
        return self._use_once("receipts", lambda: Receipts(self.producer, self.producer_name, self.redactor))

    @property
    def runs(self) -> Runs:
        return self._use(
            "runs",
            lambda: Runs(
                self.producer,
                self.producer_name,
                self.traces,
                self.redactor,
                self.positions,
                self.ledger,
                cursors=self.cursors,
            ),
        )

    @property
    def subject_requests(self) -> SubjectRequests:
        """Erase and export requests; their stores are shared by every namespace."""
        return self._use_once(
            "subject-requests",
            lambda: SubjectRequests(
                self.producer,
                self.producer_name,
                self.ledger,
                self.exports,
                self.sealer,
                self.positions,
                self.settings.read_wait_seconds,
                cursors=self.cursors,
            ),
        )

    @property
    def replays(self) -> Replays:
        shared = self.shared
        return self._use_once("replays", lambda: Replays(self.settings, shared.replays, shared.lease, open_backends))

    @property
    def namespaces(self) -> Namespaces:
        """The app's namespaces: listed, dropped (by the rules of projections.namespaces)."""
        return self._use_once(
            "namespaces", lambda: Namespaces(self.settings, self.pointer, self.shared.namespaces, self.stores)
        )

    def stores(self, namespace: str) -> Stores:
        return self.backends.stores(namespace)

    async def follow_pointer(self) -> bool:
        """Switch reads to the namespace the pointer names; True when it moved."""
        namespace = await self.pointer.active() or self.settings.namespace
        if namespace == self.current.namespace:
            return False
        self.current = self.stores(namespace)
        return True


@asynccontextmanager
async def open_services(
    settings: Settings,
    *,
    producer: bool = False,
    producer_name: str | None = None,
    metrics: Metrics | None = None,
    log_positions: bool = False,
) -> AsyncIterator[Services]:
    """Everything a process of memlog uses, built once. `producer_name` goes into the envelope of
    what this face produces (the API's is the setting; the CLI and MCP server name themselves);
    `log_positions` opens the log's end offsets, which the lag report reads."""
    backends = open_backends(settings)
    shared = backends.shared
    services = Services(
        settings=settings,
        backends=backends,
        sealer=Sealer(shared.vault, settings.key_cache_seconds, settings.key_periods()),
        current=backends.stores(settings.namespace),
        producer_name=producer_name or settings.producer_name,
        metrics=metrics,
    )
    try:
        if producer:
            # the session's tokenizer, so the exchange events this process builds carry their counts
            count_tokens = TokenCounter(load_encoding(settings.tokenizer, settings.tokenizer_file))
            services._producer = EventProducer(
                settings,
                backends.codec,
                sealer=services.sealer,
                idempotence=settings.idempotent_producer,
                count_tokens=count_tokens,
            )
            await services._producer.start()
        if log_positions:
            services._log = LogPositions(settings)
            await services._log.start()
        yield services
    finally:
        positions = services._built.get(("positions", ""))
        if isinstance(positions, Positions):
            await positions.close()
        if services._log is not None:
            await services._log.stop()
        if services._producer is not None:
            await services._producer.stop()
        services.ranker.close()
        await backends.close()
