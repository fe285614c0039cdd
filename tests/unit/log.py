"""memlog's log in a list: events sealed as the producer seals them for Kafka, then opened and applied by
the real projection steps, live or in a replay into fresh stores. Nothing here talks to a service."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memlog.adapters.in_memory import (
    InMemoryCheckpoints,
    InMemoryConversationArchive,
    InMemoryKeyVault,
    InMemorySessionStore,
)
from memlog.adapters.summarizers import ExtractiveSummarizer
from memlog.config.settings import Settings
from projections.engines import Summarizer
from projections.position import Position
from projections.session import Session, ThreadKey, ThreadPolicy
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import Event, ThreadEvent, from_record, now_ms, to_record
from streams.folds import FoldService
from streams.producer import EventProducer
from streams.sealer import Sealer, Who
from streams.steps.archive import ArchiveStep
from streams.steps.privacy import SubjectData
from streams.steps.sessions import SessionStep
from tests.unit.subject_stores import InMemoryNamespace, subject_data

Logged = tuple[str, dict[str, Any], Position]  # event type, record as it travels, position


def words(text: str) -> int:
    return len(text.split())


@dataclass
class Projections:
    """The thread projections of one namespace: sessions and the conversation archive."""

    sessions: InMemorySessionStore = field(default_factory=InMemorySessionStore)
    conversations: InMemoryConversationArchive = field(default_factory=InMemoryConversationArchive)

    async def apply(self, events: list[tuple[ThreadEvent, Position]], policy: ThreadPolicy, request: Any) -> None:
        await SessionStep(self.sessions, policy=policy, count_tokens=words, request_fold=request)(events)
        await ArchiveStep(InMemoryCheckpoints(), self.conversations)(events)

    async def dump(self, tenant: str) -> str:
        """Everything the projections hold about the tenant's threads, as one text to search."""
        parts = []
        for thread in await self.conversations.conversations(tenant):
            parts.append(repr(thread))
            ref = thread.ref
            for entry in await self.conversations.entries(ref, scope="history", snapshot=2**61):
                parts.append(repr(entry))
        for key in list(self.sessions._heads):
            parts.append(repr(await self.sessions.read(key)))
        return "\n".join(parts)


class InProcessLog(EventProducer):
    """The producer, with the log kept here: each batch is sealed, stored, then projected live."""

    def __init__(self, settings: Settings, sealer: Sealer, live: Projections, policy: ThreadPolicy) -> None:
        super().__init__(settings, Codec(Catalog()), sealer=sealer)
        self.sealer = sealer
        self.records: list[Logged] = []
        self.live = live
        self.policy = policy
        self.requested: set[ThreadKey] = set()
        self.lagging = False  # True: records wait for `deliver`, as behind a projection that lags
        self.delivered = 0  # records applied live so far

    async def produce(self, events: Sequence[Event], *, pinned: dict[Who, tuple[str, bytes]] | None = None) -> Position:
        for event in events:
            record = await self.sealer.seal(event.TYPE, to_record(event), pinned)
            self.records.append((event.TYPE, record, Position("threads", 0, len(self.records))))
        if not self.lagging:
            await self.deliver()
        return self.records[-1][2]

    async def deliver(self, count: int | None = None) -> None:
        """Apply the next `count` records not applied yet (all of them by default), as one batch."""
        start = self.delivered
        self.delivered = len(self.records) if count is None else min(len(self.records), start + count)
        await self.live.apply(
            await opened(self.sealer, self.records[start : self.delivered]), self.policy, self.requested.add
        )

    async def replay(self) -> Projections:
        """Every record of the log into fresh projections, as `memlog replay` does: erased ones do not open."""
        rebuilt = Projections()
        await rebuilt.apply(await opened(self.sealer, self.records), self.policy, None)
        return rebuilt


async def opened(sealer: Sealer, records: Sequence[Logged]) -> list[tuple[ThreadEvent, Position]]:
    """The events that still open (their key exists), in log order."""
    results = await sealer.open_many([(name, record) for name, record, _ in records])
    out = []
    for (name, _, position), item in zip(records, results, strict=True):
        if isinstance(item, dict):
            event = from_record(name, item)
            assert not isinstance(event, Exception)
            out.append((event, position))  # type: ignore[arg-type]
    return out


@dataclass
class World:
    """One worker's view: a key vault, the log, live projections, folds, and the privacy stores."""

    log: InProcessLog
    folds: FoldService
    data: SubjectData

    @property
    def live(self) -> Projections:
        return self.log.live

    async def fold_requested(self) -> None:
        """Run the folds the session step asked for, as the fold agent does after an answer."""
        while self.log.requested:
            key = min(self.log.requested)
            self.log.requested.discard(key)
            await self.folds.fold(key)


def world(settings: Settings, policy: ThreadPolicy, summarizer: Summarizer | None = None) -> World:
    vault = InMemoryKeyVault(os.urandom(32))
    sealer = Sealer(vault, cache_seconds=0)
    live = Projections()
    log = InProcessLog(settings, sealer, live, policy)
    folds = FoldService(live.sessions, log, summarizer or ExtractiveSummarizer(), policy, "test")
    stores = InMemoryNamespace(sessions=live.sessions, conversations=live.conversations, receipts=None)
    data = subject_data(stores, vault=vault, sealer=sealer)
    live.sessions.now_ms = now_ms()
    return World(log, folds, data)


def tokens_add_up(session: Session) -> bool:
    """A thread's token count is its exchanges', its summary's and its summary parts'."""
    head = session.head
    parts = sum(segment.tokens for segment in head.segments)
    return head.tokens == sum(exchange.tokens for exchange in session.exchanges) + head.summary_tokens + parts
