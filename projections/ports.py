"""The interfaces projection stores implement. Each has a contract test suite in tests/contracts/.

Every write carries the log position of the event that caused it and is applied only if
that position is newer than what the key already holds, so redelivery and replay are no-ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from projections.archives import ArchiveOp, ConversationMeta, ConversationRef, Entry, EntryScope, Scope
from projections.facts import SubjectFacts
from projections.position import Position
from projections.session import Loaded, Session, SessionWrite, ThreadKey

__all__ = [
    "ArchiveStore",
    "ArchivedEvent",
    "Checkpoints",
    "ConversationArchive",
    "FactStore",
    "SessionStore",
    "ThreadKey",
]


class Checkpoints(Protocol):
    """The newest offset a projection has applied, per partition; read-your-writes waits on it."""

    async def applied(self, topic: str, partition: int) -> int:
        """The highest applied offset of a partition, -1 when none."""
        ...

    async def advance(self, position: Position) -> None:
        """Record a position as applied without writing anything else (poison, no-op records)."""
        ...


class SessionStore(Checkpoints, Protocol):
    """Threads (sessions, public, automation): whole exchanges, a head with the summary, and an expiry."""

    async def load(self, wanted: list[tuple[ThreadKey, str]]) -> Loaded:
        """Heads of sessions and some of their exchanges, as the pure rule needs them (one round trip)."""
        ...

    async def write(self, writes: list[SessionWrite], now_ms: int) -> list[bool]:
        """Apply each write atomically with its position, in order; False where that position was applied already.

        A change that expired by `now_ms` is not written, but its position still counts as applied.
        """
        ...

    async def read(self, key: ThreadKey) -> Session | None:
        """The whole session as one consistent snapshot, None when there is none."""
        ...

    async def drop(self, key: ThreadKey) -> None: ...


@dataclass(frozen=True)
class ArchivedEvent:
    """An event exactly as it was logged, kept with its position."""

    position: Position
    tenant: str
    subject: str | None
    thread: str
    exchange_id: str | None
    event_type: str
    occurred_at: int
    record: dict[str, Any]


class ArchiveStore(Protocol):
    """The originals of every thread, in log order per thread."""

    async def append(self, events: list[ArchivedEvent]) -> int:
        """Store events; those whose position is stored already are skipped. Returns how many were new."""
        ...

    async def events(self, tenant: str, subject: str, thread: str) -> list[ArchivedEvent]: ...

    async def count(self, tenant: str) -> int: ...

    async def erase_subject(self, tenant: str, subject: str) -> int:
        """Delete the subject's events; how many (for issue 7's erasure cascade)."""
        ...

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]: ...


class FactStore(Checkpoints, Protocol):
    """Subjects' lasting memories, one record per (tenant, subject)."""

    async def load(self, tenant: str, subject: str) -> SubjectFacts | None: ...

    async def write(self, tenant: str, subject: str, state: SubjectFacts, position: Position) -> bool:
        """Store the facts with the event's position; False when that position was applied already.

        The kept-until date only ever moves later, whatever the order of writes and questions. The
        caller advances the checkpoint once per batch, after its writes.
        """
        ...

    async def write_many(self, items: list[tuple[str, str, SubjectFacts, Position]]) -> int:
        """`write` for several subjects at once (one round trip where the store can); how many were new."""
        ...

    async def questioned(self, asked: list[tuple[str, str, int]], keep_ms: int) -> None:
        """A question moves the kept-until date of the subject's facts (idempotent, in any order with fact writes)."""
        ...


class ConversationArchive(Protocol):
    """Conversations with their active and archived generations (004). Operations come from
    projections.archives.plan_archive and are applied in order; each acts only on entries older than
    its own position, so applying one twice changes nothing."""

    async def apply(self, ops: list[ArchiveOp]) -> None: ...

    async def insert_entries(self, entries: list[Entry]) -> None: ...

    async def meta(self, ref: ConversationRef) -> ConversationMeta | None: ...

    async def conversations(
        self, tenant: str, thread: str | None = None, owner: str | None = None
    ) -> list[ConversationMeta]: ...

    async def candidates(
        self,
        tenant: str,
        thread: str,
        owner: str,
        terms: list[str],
        *,
        conversation: str | None,
        scope: Scope,
        snapshot: int,
        since: int | None = None,
        until: int | None = None,
    ) -> list[Entry]:
        """Entries in scope at the snapshot sharing a term with the query (all in scope without terms)."""
        ...

    async def entries(
        self, ref: ConversationRef, *, scope: EntryScope, snapshot: int, after_seq: int = -1, limit: int = 500
    ) -> list[Entry]: ...

    async def occurrences(self, tenant: str, thread: str, owner: str, entry_id: str) -> list[Entry]: ...

    async def neighbours(
        self, ref: ConversationRef, seqs: list[int], radius: int, snapshot: int
    ) -> dict[int, list[Entry]]:
        """Up to `radius` entries either side of each of the conversation's `seqs`, in order."""
        ...

    async def erase_subject(self, tenant: str, subject: str) -> int: ...

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]: ...
