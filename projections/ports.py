"""The interfaces every store implements, one per store class. Each has a contract test suite in
tests/contracts/, run against its in-memory implementation (memlog/adapters/in_memory/) and its Redis or
MongoDB one.

Every projection write carries the log position of the event that caused it and is applied only if
that position is newer than what the key already holds, so redelivery and replay are no-ops.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import Any, Protocol

from projections.archives import ArchiveOp, ConversationMeta, ConversationRef, Entry, EntryScope, Known, Scope
from projections.facts import SubjectFacts
from projections.generations import GenerationAge
from projections.namespaces import NamespaceEntry
from projections.position import Position
from projections.postings import Within
from projections.ready import ReadyThread
from projections.session import Loaded, Session, SessionWrite, ThreadKey
from projections.traces import Served

__all__ = [
    "FACT_SLOT_SECONDS",
    "PENDING_SECONDS",
    "ArchiveSearch",
    "Checkpoints",
    "Clock",
    "ConversationArchive",
    "Counters",
    "Exports",
    "FactSlots",
    "FactStore",
    "Idempotency",
    "KeyVault",
    "Ledger",
    "NamespaceEntry",
    "NamespacePointer",
    "NamespaceRegistry",
    "ReplayRecords",
    "SessionStore",
    "ThreadKey",
    "TraceStore",
    "utc_now",
]

Clock = Callable[[], dt.datetime]  # the stores that keep wall-clock dates read the time through one


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Checkpoints(Protocol):
    """The newest offset a projection has applied, per partition; read-your-writes waits on it."""

    async def applied(self, topic: str, partition: int) -> int:
        """The highest applied offset of a partition, -1 when none."""
        ...

    async def advance(self, position: Position) -> None:
        """Record a position as applied without writing anything else (poison, no-op records)."""
        ...


class ServedMarks(Protocol):
    """Which stored runs serve which exchanges of a thread (seed 004's evidence), kept beside the thread,
    so that a context read joins its tool calls to their runs without asking the trace store. A
    thread with no mark is asked about as before, until the namespace's marks are complete: a mark
    missing in error would hide evidence."""

    async def mark_served(self, served: dict[ThreadKey, Served]) -> None:
        """Add each thread's links to its mark (`projections.traces.Served`); a mark lasts until the
        latest of its runs' ends, and one already past is not written. Adding a link again changes
        nothing a read sees."""
        ...

    async def served_marks_complete(self) -> bool:
        """True once every run the namespace's trace store holds has marked its thread."""
        ...

    async def complete_served_marks(self) -> None:
        """Record that they have: from now on the trace projection marks every run it stores."""
        ...


class SessionStore(Checkpoints, ServedMarks, Protocol):
    """Threads (sessions, public, automation): whole exchanges, a head with the summary, and an expiry;
    and each thread's served mark (`ServedMarks`: `read_ready` reports it as `ReadyThread.served`;
    a subject's erasure removes their session's)."""

    async def load(self, wanted: list[tuple[ThreadKey, str]]) -> Loaded:
        """Heads of sessions and some of their exchanges, as the pure rule needs them (one round trip)."""
        ...

    async def versions(self, keys: list[ThreadKey]) -> dict[ThreadKey, str | None]:
        """Each thread's version, as `read_ready` reports it (None where the store holds no thread): one
        light round trip, so a replay can tell that a thread it keeps in memory is still as it wrote it."""
        ...

    async def write(self, writes: list[SessionWrite], now_ms: int) -> list[bool]:
        """Apply each write atomically with its position, in order; False where that position was applied already.

        A change that expired by `now_ms` is not written, but its position still counts as applied.
        """
        ...

    async def read(self, key: ThreadKey) -> Session | None:
        """The whole session as one consistent snapshot, None when there is none."""
        ...

    async def read_ready(self, key: ThreadKey) -> ReadyThread | None:
        """The thread as a context read serves it (`projections/ready.py`), None when there is none: the
        same content as `ReadyThread.of_session(read(key), ...)`, in one round trip where it is kept ready.
        Its `version` changes whenever the content does."""
        ...

    async def drop(self, key: ThreadKey) -> None: ...

    async def erase_subject(self, tenant: str, subject: str) -> dict[str, int]:
        """The subject's session, and their lines and their parts of the summaries on the tenant's public
        and automation threads.

        Returns the counts: `session_exchanges`, `shared_thread_lines` and `shared_thread_summaries`.
        """
        ...

    async def export_subject(self, tenant: str, subject: str) -> dict[str, Any]:
        """`session` (its summary and exchanges, None when there is none), `shared_thread_lines` (the
        subject's exchanges on shared threads, each with its `thread` and `agent`) and
        `shared_thread_summaries` (their parts of those threads' summaries), as plain data."""
        ...


class Counters(Protocol):
    """Counters operators look at: dead letters per source topic."""

    async def count_dead_letter(self, topic: str) -> None: ...

    async def dead_letters(self) -> dict[str, int]:
        """The count per source topic; a topic without dead letters is absent."""
        ...


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

    async def erase_subject(self, tenant: str, subject: str) -> int:
        """The subject's facts with their token index and embeddings; how many facts went."""
        ...

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        """The subject's facts as they are shown (`Fact.view`)."""
        ...


class TraceStore(Checkpoints, Protocol):
    """Run traces, one document per run as `projections.traces.trace_document` makes it, kept until
    its `expires_at`. Reads take the time (`now_ms`) and never return an expired run, whenever the
    store itself deletes it."""

    async def append(self, docs: list[dict[str, Any]]) -> int:
        """Store the runs; a run stored already (the same `_id`) is skipped. Returns how many were new."""
        ...

    async def get(self, tenant: str, run_id: str, now_ms: int) -> dict[str, Any] | None:
        """The run's trace, None when there is none or it has expired by `now_ms`."""
        ...

    async def recent(
        self,
        tenant: str,
        now_ms: int,
        *,
        agent: str | None = None,
        status: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 50,
        before: tuple[int, str] | None = None,
    ) -> list[dict[str, Any]]:
        """The tenant's unexpired runs, newest `started_at` first (ties: greater `run_id` first), at most
        `limit`; `since` is inclusive, `until` exclusive; `before` (started_at, run_id): only the runs
        after that one in this order (a page's last run: the next page)."""
        ...

    async def erase_subject(self, tenant: str, subject: str) -> int:
        """Every trace of the subject's runs; how many."""
        ...

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]: ...

    async def served_threads(self, now_ms: int) -> dict[ThreadKey, Served]:
        """Every thread an unexpired run serves, with its runs' links there (`projections.traces.served_threads`
        over every stored run): what the served marks must hold."""
        ...

    async def served(self, tenant: str, thread: str, exchange_ids: list[str], now_ms: int) -> list[dict[str, Any]]:
        """The unexpired runs that served one of these exchanges of `thread` (its `exchange_thread`, as
        `projections.archives.thread_ref` writes it), each as `run_id`, `exchange_id`, `call_index`,
        `started_at` (seed 004, evidence; `projections.evidence` picks one per call)."""
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

    async def tenants(self) -> list[str]:
        """Every tenant with a conversation archived (scheduled retention goes through them)."""
        ...

    async def generation_ages(self, ref: ConversationRef) -> list[GenerationAge]:
        """The conversation's generations (what each fold or reset took out of its transcript), oldest
        first, with their newest entry's time: what main's generation age limit reads."""
        ...

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
        limit: int | None = None,
    ) -> list[Entry]:
        """The entries of every exchange in scope at the snapshot one of whose entries holds one of the
        index terms (all in scope without terms); of at most `limit` exchanges' groups when given."""
        ...

    async def bounded_candidates(
        self, tenant: str, thread: str, owner: str, terms: list[str], *, within: Within, per_term: int, limit: int
    ) -> tuple[list[Entry], bool]:
        """`candidates` of any scope or time (the caller picks), but a term more than `per_term` exchanges
        of the thread hold (to the snapshot) gives the `per_term` where it weighs most; and whether one was."""
        ...

    async def entries(
        self,
        ref: ConversationRef,
        *,
        scope: EntryScope,
        snapshot: int,
        after_seq: int = -1,
        limit: int = 500,
        since: int | None = None,
        until: int | None = None,
    ) -> list[Entry]:
        """In seq order after `after_seq`; with `since`/`until`, only those that occurred in [since, until)."""
        ...

    async def newest_time(
        self,
        tenant: str,
        thread: str,
        owner: str,
        *,
        conversation: str | None,
        scope: Scope,
        snapshot: int,
        since: int,
        until: int,
    ) -> int | None:
        """The newest `occurred_at` in [since, until) of the entries in scope at the snapshot; None if none."""
        ...

    async def count_between(
        self,
        tenant: str,
        thread: str,
        owner: str,
        bounds: Sequence[int],
        *,
        conversation: str | None,
        scope: Scope,
        snapshot: int,
    ) -> list[int]:
        """How many entries in scope at the snapshot occurred in each [bounds[i], bounds[i + 1]) (the
        calendar's local days); `bounds` strictly ascending, one count fewer than bounds."""
        ...

    async def occurrences(self, tenant: str, thread: str, owner: str, entry_id: str) -> list[Entry]: ...

    async def neighbours(
        self, ref: ConversationRef, seqs: list[int], radius: int, snapshot: int, known: Known = (), texts: bool = True
    ) -> dict[int, list[Entry]]:
        """Up to `radius` entries either side of each of the conversation's `seqs`, in order, without their
        originals (nor their texts unless `texts`: a store may leave them out). `known`: entries the caller read
        already (any conversation), a hint that may save reads; the answer is the same without it."""
        ...

    async def erase_subject(self, tenant: str, subject: str) -> int: ...

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]: ...


class ArchiveSearch(Protocol):
    """Search across the threads of a tenant (004: an agent's explicit search, an operator's); the
    archive's entries, read through their own indexes. The rules are in projections/search.py."""

    async def across(
        self, tenant: str, terms: list[str], *, agent: str | None, limit: int | None = None
    ) -> list[Entry]:
        """The entries of every exchange of the tenant one of whose entries holds one of the index terms
        (every one without terms), of every thread, conversation and scope; only those of events by
        `agent` when given; of at most `limit` exchanges' groups when given. The caller applies
        snapshot, scope and dates."""
        ...

    async def bounded(
        self, tenant: str, terms: list[str], *, agent: str | None, per_term: int, limit: int | None = None
    ) -> tuple[list[Entry], bool]:
        """As `across`, but a term more than `per_term` exchanges hold contributes only the `per_term`
        exchanges where it weighs most (projections/postings.py: their impact); and whether
        a term was cut so. Every exchange of a term held by fewer is found, as `across` finds it."""
        ...


# An attempt that died between reserving an idempotency key and answering (its store went away
# before it could let go) must not block every retry for a day: its reservation lapses after this.
PENDING_SECONDS = 60


class Idempotency(Protocol):
    """Claims on a key per (tenant, thread, owner), reserved before anything is produced, so of two
    concurrent attempts exactly one produces: the idempotency key of a recorded exchange, and the
    conversation name a fork or rename takes (memlog.conversations.target_key)."""

    async def reserve(
        self, tenant: str, thread: str, owner: str, key: str, subject: str | None, digest: str | None = None
    ) -> dict[str, Any] | None:
        """None when this call holds the key now; else what the key holds: `state` "pending", or
        "done" with the `accepted` answer, the `subject`, and the `digest` of the body it was
        reserved for (None for a claim made without one).

        A pending reservation lapses after PENDING_SECONDS: the next call after that takes the key
        (with its own digest).
        """
        ...

    async def complete(self, tenant: str, thread: str, owner: str, key: str, accepted: dict[str, Any]) -> None:
        """Keep the accepted answer; every later reservation of the key returns it."""
        ...

    async def release(self, tenant: str, thread: str, owner: str, key: str) -> None:
        """Let go of a pending reservation (its attempt failed); a completed key stays."""
        ...

    async def drop(self, tenant: str, thread: str, owner: str, key: str, accepted: dict[str, Any]) -> None:
        """Delete a completed claim that still holds this `accepted` answer (what it claimed is done and
        free again); a claim taken again since, or pending, stays."""
        ...

    async def erase_subject(self, tenant: str, subject: str) -> int: ...

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        """The subject's keys: `tenant`, `subject`, `state` and, once done, `accepted`."""
        ...


FACT_SLOT_SECONDS = 600  # a reservation outlives any healthy projection lag; a lapsed one frees its slot


HeldFacts = Callable[[], Awaitable[Collection[str]]]  # the ids of the facts the projection holds, read now


class FactSlots(Protocol):
    """Room in a subject's lasting memory (seed 000: at most 30 facts), reserved when a fact is
    accepted: the projection may lag behind the writes, so counting its facts alone would accept
    what it later has to drop. A reservation counts until the projection holds the fact, or until
    it lapses after FACT_SLOT_SECONDS."""

    async def reserve(self, tenant: str, subject: str, fact_id: str, held: HeldFacts, limit: int) -> bool:
        """Reserve room for `fact_id` unless the facts the projection holds (`held()`, by id) and the
        reservations still pending reach `limit`. Of concurrent calls for the last slot, one wins.

        `held` is read after the reservations, at every attempt: a reservation another writer dropped
        because the projection had applied its fact is then always seen among the held ones (read
        before, a stale list and the pruned reservations could miss it, and let a 31st fact in)."""
        ...

    async def release(self, tenant: str, subject: str, fact_id: str) -> None:
        """Let go of a reservation whose fact was never produced."""
        ...

    async def erase_subject(self, tenant: str, subject: str) -> int: ...


class KeyVault(Protocol):
    """Data keys held wrapped by the master key: a standing key per (tenant, subject), and per-period
    keys of the subject (`projections.periods`); deleting a key shreds every event sealed with it. A
    stored key that does not unwrap with this vault's master key raises projections.sealing.SealError."""

    async def key_for_write(self, tenant: str, subject: str | None, at_ms: int | None = None) -> tuple[str, bytes]:
        """The subject's (key id, data key), made on first use: its standing key, or with `at_ms` the key
        of the period holding that instant. Raises SubjectErasing while the subject is being erased.
        Without a subject: the tenant's own key (standing, whatever `at_ms`), which seals events about no
        subject (runs without one) and is never erased with a subject."""
        ...

    async def key_in_use(self, tenant: str, subject: str | None, at_ms: int | None = None) -> tuple[str, bytes] | None:
        """`key_for_write`'s key without making the subject's standing key: None when there is none (never
        written, or erased); a period key of a subject that has one is made. Raises SubjectErasing while
        the subject is being erased."""
        ...

    async def keys_by_id(self, key_ids: list[str]) -> dict[str, bytes]:
        """The active keys among these ids; an id left out belongs to an erased or erasing subject, to a
        shredded period, or to none."""
        ...

    async def begin_erasure(self, tenant: str, subject: str) -> None:
        """Stop the subject's keys being used, for writing or reading, while the subject's data is deleted."""
        ...

    async def delete(self, tenant: str, subject: str) -> int:
        """Delete every key of the subject (standing and per period); how many. A later write makes a new key."""
        ...

    async def shred_periods(self, ended_by_ms: int, limit: int = 1000) -> int:
        """Delete at most `limit` period keys whose period ended at or before `ended_by_ms`; how many."""
        ...


class Ledger(Protocol):
    """What operators asked for and what was done. A subject is named by a keyed digest of tenant
    and subject (projections.sealing.subject_digest), never by name."""

    async def record(self, kind: str, *, subject: str | None = None, **fields: Any) -> str:
        """Add an entry and return its id: `entry_id` among the fields, or a new one. An id recorded
        already keeps its first entry (a redelivered event). A subject needs `tenant` among the fields."""
        ...

    async def get(self, entry_id: str) -> dict[str, Any] | None:
        """The entry: `_id`, `kind`, `at` (an aware datetime), its fields, and `subject_digest` for a subject."""
        ...

    async def entries(
        self,
        *,
        tenant: str | None = None,
        subject: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        before: tuple[dt.datetime, str] | None = None,
    ) -> list[dict[str, Any]]:
        """Entries newest first (ties: greater id first), at most `limit`; `before` (at, id): only the
        entries after that one in this order. A subject is known only within its tenant: ValueError without one."""
        ...

    async def erased(self, tenant: str, subject: str) -> dict[str, Any] | None:
        """The latest completed erasure (`kind` "erased") of the subject, if any."""
        ...


class Exports(Protocol):
    """Export bundles by request id, kept a while and deleted with their subject.

    A bundle has no size limit: it is stored and read back in parts, never as one document (MongoDB
    refuses one past 16 MiB), so a heavy subject's export neither fails nor stalls the erasures after it.
    """

    async def put(self, request_id: str, tenant: str, subject: str, chunks: AsyncIterable[bytes]) -> int:
        """Store the request's bundle, the concatenation of `chunks` (UTF-8 JSON, any sizes), replacing
        one stored under that id; it can be read once every part is in. Returns its size in bytes."""
        ...

    async def get(self, request_id: str) -> dict[str, Any] | None:
        """`tenant`, `subject`, `size` (bytes) and `created_at` of a whole stored bundle; None when there is none."""
        ...

    def read(self, request_id: str) -> AsyncIterator[bytes]:
        """The bundle's bytes, part after part; nothing when there is none."""
        ...

    async def erase_subject(self, tenant: str, subject: str) -> int:
        """The subject's bundles, whole or partly stored; how many."""
        ...


class NamespacePointer(Protocol):
    """Which namespace reads and workers use, for one app id; `memlog replay` moves it once a rebuild is done."""

    async def active(self) -> str | None:
        """The namespace switched to last; None before any switch (the configured namespace holds)."""
        ...

    async def switch(self, namespace: str, **info: Any) -> None:
        """Point at `namespace`, noting `info` with it (the previous namespace, when, which projections).
        With `previous`, only from it: Conflict when the pointer names another namespace by now."""
        ...


class ReplayLease(Protocol):
    """One replay at a time per app id, from the API or the CLI (DESIGN, "One replay at a time")."""

    async def take(self, holder: str, note: str = "") -> None:
        """Hold the lease, or renew it for its holder; Conflict while another holds it unexpired."""
        ...

    async def release(self, holder: str) -> None: ...

    async def holder(self) -> str | None:
        """Who holds it now; None when it is free or expired."""
        ...


class ReplayRecords(Protocol):
    """Replays an operator started through the API, one record each by id (projections.replays), kept
    in the shared privacy database: their state outlives the API process that runs them."""

    async def save(self, replay_id: str, record: dict[str, Any]) -> None:
        """Store the replay's record, replacing what it held."""
        ...

    async def get(self, replay_id: str) -> dict[str, Any] | None: ...

    async def running(self) -> list[dict[str, Any]]:
        """The records whose state is `running`."""
        ...


class NamespaceRegistry(Protocol):
    """Every namespace of one app id that a worker or a replay writes into, with its state
    (projections.namespaces): an erasure reaches each, and the worker drops the ones out of use.

    Times come from the registry's clock. A namespace unknown to a method that names one is left alone,
    except by `building` and `activate`, which record it.
    """

    async def building(self, namespace: str, note: str = "") -> None:
        """A replay starts writing into `namespace`: recorded as `building`, heard of now. Raises
        Conflict when it is the active one."""
        ...

    async def heard(self, namespace: str) -> None:
        """The replay building `namespace` is alive (its `seen_at` becomes now)."""
        ...

    async def activate(self, namespace: str) -> list[str]:
        """`namespace` becomes the `active` one (recorded if unknown); every other active one becomes
        `previous`, retired now. Returns those; none when `namespace` was active already."""
        ...

    async def abandon(self, namespace: str, note: str) -> None:
        """A `building` namespace no replay will switch to: `abandoned`, retired now. Any other state stays."""
        ...

    async def adopt(self, namespace: str, note: str) -> bool:
        """Record a namespace found holding data but unknown here as `previous`, retired now; False when
        it is known already (nothing changes)."""
        ...

    async def get(self, namespace: str) -> NamespaceEntry | None: ...

    async def entries(self) -> list[NamespaceEntry]:
        """Every namespace recorded, oldest first."""
        ...

    async def remove(self, namespace: str) -> None:
        """Forget a namespace (it was dropped)."""
        ...
