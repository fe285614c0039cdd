"""`Stores`: the projection stores of one namespace, each by its port. memlog/adapters/wiring.py builds them (the
one place that knows the classes behind the ports); a use case takes them by these names alone."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from projections.hybrid import SimilarEntries
from projections.ports import (
    ArchiveSearch,
    Checkpoints,
    ConversationArchive,
    Counters,
    FactSlots,
    FactStore,
    Idempotency,
    SessionStore,
    TraceStore,
)
from projections.receipts import ReceiptStore

Prepare = Callable[[], Awaitable[None]]


async def prepare_all(prepares: tuple[Prepare, ...]) -> None:
    for prepare in prepares:
        await prepare()


@dataclass(frozen=True)
class Stores:
    """The projection stores of one namespace (a Redis key prefix and a MongoDB database), each by its
    port; only memlog/adapters/wiring.py knows the classes behind them."""

    namespace: str
    database: Any  # the namespace's MongoDB database (a pymongo AsyncDatabase; only the composition root reads it)
    sessions: SessionStore
    counters: Counters
    archive_checkpoints: Checkpoints
    facts: FactStore
    fact_activity: Checkpoints
    traces: TraceStore
    receipts: ReceiptStore  # seed 004's receipts, written by the trace projection
    privacy_checkpoints: Checkpoints  # the privacy step's applied offsets
    conversations: ConversationArchive
    idempotency: Idempotency
    fact_slots: FactSlots
    archive_search: ArchiveSearch
    similar: SimilarEntries | None = None  # archive search's vectors (MEMLOG_SEARCH_VECTORS); None: words alone
    _prepares: tuple[Prepare, ...] = field(default=(), repr=False)
    _drop: Prepare | None = field(default=None, repr=False)

    async def prepare(self) -> None:
        """Create every index the namespace's stores need (idempotent): the worker, replay and the API
        all call it, so a namespace switched to is complete whoever opened it first."""
        await prepare_all(self._prepares)

    async def drop(self) -> None:
        """Delete everything the namespace holds: its MongoDB database and every Redis key of its prefix."""
        assert self._drop is not None, "opened without its clients"
        await self._drop()
