"""Conversation archives: pure rules (seed 004, "Conversation history and archives").

Every thread owner (a subject's session, the tenant's public thread, an agent's automation thread)
holds named conversations; `main` is the current one, the one the session projection shows. Each
exchange event becomes one archived entry, kept exactly as received. Compaction (a fold) and reset
archive a whole generation first; rename, fork, archive and purge act on one conversation.

No I/O here: `plan_archive` turns events into operations a store executes in order, and search,
cursors, export scope and retention planning are functions of what a store hands back.

Idempotent by position: a thread owner lives on one partition, so an entry's `seq` (its offset) is
a per-thread sequence. Every operation acts only on entries older than its own offset, and an
entry's store id is its position, so applying an event twice changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from projections import relevance
from projections.cursors import Cursors, entries, items, whole
from projections.evidence import answered
from projections.forgetting import is_forgotten_call
from projections.position import Position
from schemas.errors import InvalidEvent
from schemas.events import (
    AUTOMATION_THREAD,
    MAIN_CONVERSATION,
    PUBLIC_THREAD,
    SESSION_THREAD,
    AnswerGiven,
    QuestionAsked,
    ThreadArchived,
    ThreadEvent,
    ThreadFolded,
    ThreadForked,
    ThreadPurged,
    ThreadRenamed,
    ThreadReset,
    ToolCalled,
    check_name,
    conversation_of,
)

NEVER = 2**62  # compacted_at / reset_at of an entry that has not been: compares after every offset
MAX_RESULTS = 200  # 004: "Results are bounded to 200"
EXCERPT_CHARS = 240  # 004: "excerpts up to 240 characters"
NEIGHBOUR_RADIUS = 1  # 004: "The default neighbor radius is one, capped at three."
MAX_NEIGHBOUR_RADIUS = 3
EXPORT_PAGE_MAX = 500  # 004: "Page size is capped at 500."
FORK_ENTRIES = 200  # 004: "Fork defaults to the latest 200 active entries"
Scope = Literal["current", "history"]
EntryScope = Literal["current", "history", "reset"]  # reset: the reset archives alone
Provenance = Literal["active", "compacted", "reset"]


@dataclass(frozen=True, order=True)
class ConversationRef:
    tenant: str
    thread: str
    owner: str
    conversation: str = MAIN_CONVERSATION


def parse_thread(ref: str) -> tuple[str, str]:
    """A thread in a URL: `session:<subject>`, `public`, or `automation:<agent>` -> (thread, owner)."""
    kind, _, owner = ref.partition(":")
    if kind == PUBLIC_THREAD and not owner:
        return PUBLIC_THREAD, ""
    if kind in (SESSION_THREAD, AUTOMATION_THREAD) and owner:
        return kind, check_name("thread", owner)
    raise InvalidEvent("thread", f"{ref!r} is not session:<subject>, public or automation:<agent>")


def thread_ref(thread: str, owner: str) -> str:
    return PUBLIC_THREAD if thread == PUBLIC_THREAD else f"{thread}:{owner}"


@dataclass(frozen=True)
class Entry:
    """One archived message occurrence: a question, a tool call, an answer or a fold's summary."""

    ref: ConversationRef
    entry_id: str  # unique within its conversation
    store_id: str  # the position it came from: redelivery inserts nothing new
    seq: int  # its offset: per-thread order, shown as a decimal string
    exchange_id: str | None
    role: str  # question, tool, answer, summary
    occurred_at: int
    text: str  # what search matches
    original: str | None  # the JSON text exactly as received, when this entry carries it
    subject: str | None = None
    agent: str | None = None
    enters_prompt: bool = True  # 004: a compaction summary is a debug entry, not a person-facing message
    compacted_at: int = NEVER  # offset of the fold that took it out of the active transcript
    reset_at: int = NEVER  # offset of the reset that archived it
    archives: tuple[str, ...] = ()  # the archived generations it belongs to
    forked_from: str | None = None
    terms: tuple[str, ...] = ()
    n: int | None = field(default=None, compare=False)  # its place in its conversation (projections/places)
    terms_cut: int = 0  # distinct tokens past ENTRY_TERMS, left out of the index (the mark of a capped entry)

    def provenance(self, snapshot: int = NEVER - 1) -> Provenance:
        if self.reset_at <= snapshot:
            return "reset"
        if self.compacted_at <= snapshot:
            return "compacted"
        return "active"

    def view(self, snapshot: int = NEVER - 1) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "conversation": self.ref.conversation,
            "thread": thread_ref(self.ref.thread, self.ref.owner),
            "seq": str(self.seq),
            "exchange_id": self.exchange_id,
            "role": self.role,
            "occurred_at": self.occurred_at,
            "text": self.text,
            "provenance": self.provenance(snapshot),
            "archives": list(self.archives),
            "enters_prompt": self.enters_prompt,
            "forked_from": self.forked_from,
            # the mark of an entry indexed by its first ENTRY_TERMS distinct tokens: how many were left out
            **({"terms_cut": self.terms_cut} if self.terms_cut else {}),
        }


@dataclass(frozen=True)
class ConversationMeta:
    ref: ConversationRef
    subject: str | None = None
    kind: str = "main"  # main, task or subagent: the retention policy that applies
    created_at: int = 0
    last_at: int = 0  # occurred_at of the newest entry
    last_seq: int = -1
    archived: bool = False
    protected: bool = False
    label: str | None = None
    open_exchange: str | None = None  # a question without its answer yet: the conversation is running
    generations: tuple[str, ...] = ()  # archived generations, oldest first
    created_by: int = -1  # offset of the event that created it (a fork reserves its target with it)
    entries: int | None = field(default=None, compare=False)  # its count of places, where the store keeps one

    @property
    def running(self) -> bool:
        return self.open_exchange is not None

    def view(self) -> dict[str, Any]:
        return {
            "conversation": self.ref.conversation,
            "thread": thread_ref(self.ref.thread, self.ref.owner),
            "kind": self.kind,
            "created_at": self.created_at,
            "last_at": self.last_at,
            "last_seq": str(self.last_seq),
            "archived": self.archived,
            "protected": self.protected,
            "label": self.label,
            "running": self.running,
            "current": self.ref.conversation == MAIN_CONVERSATION,
            "generations": list(self.generations),
        }


# --- tokens and matching -------------------------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    """ASCII runs, lowercased: the index keys of entries archived before words of every script."""
    return _TOKEN.findall(text.lower())


# an entry's index keys at most: SecantusDB rewrites every key of a document at each update of it
# (measured 0.1 to 0.15 ms a key with the two multikey indexes), so this bounds what one entry costs
# the worker that archives it, and so every other tenant that waits behind it (DESIGN, "Isolation of work")
ENTRY_TERMS = 30_000


def index_terms(text: str) -> tuple[str, ...]:
    """Every distinct stem of the entry (projections/relevance.py), for the candidate index: none left
    out, so an entry the matcher would match is always a candidate (the matcher, not the index, is the
    final authority), up to ENTRY_TERMS (see `capped_terms`)."""
    return capped_terms(text)[0]


def capped_terms(text: str) -> tuple[tuple[str, ...], int]:
    """The entry's index terms (its distinct stems, sorted), and how many distinct words were left out:
    past ENTRY_TERMS, the stems of the first ENTRY_TERMS distinct words in text order are kept, the rest
    found only by reading. Capped before stemming, which is the worker's cost per word."""
    distinct = list(dict.fromkeys(relevance.words(text)))
    kept = distinct[:ENTRY_TERMS]
    return tuple(sorted({relevance.stem(w) for w in kept})), len(distinct) - len(kept)


@dataclass(frozen=True)
class Match:
    phrase: bool
    coverage: int  # distinct query terms found
    at: int  # where the excerpt centres
    score: float = 0.0  # the exchange's BM25 score (projections/relevance.py)


def normal(text: str) -> str:
    """Lower-cased, whitespace runs as one space: what a phrase is matched in (split and join: the same
    whitespace as the pattern `\\s`, about 15 times faster on a 22 KB text)."""
    return " ".join(text.lower().split())


def match(query: str, text: str) -> Match | None:
    """Exact phrase first, then any content term of the query (a stop word only when the query has
    nothing else)."""
    phrase = normal(query)
    if not phrase:
        return None
    normalised = normal(text)
    wanted = set(relevance.query_of(query).terms)
    at = normalised.find(phrase)
    if at >= 0:
        return Match(True, len(wanted), at)
    found = wanted.intersection(relevance.index_terms(text))
    if not found:
        return None
    return Match(False, len(found), relevance.locate(normalised, found))


def excerpt(text: str, at: int, limit: int = EXCERPT_CHARS) -> str:
    """At most `limit` characters of the (whitespace-normalised) text around the match."""
    normal = " ".join(text.split())  # as `normal` does, keeping the case
    if len(normal) <= limit:
        return normal
    start = max(0, min(at - limit // 3, len(normal) - limit))
    return normal[start : start + limit]


Known = Sequence[Entry]  # entries of the archive a caller read already: a hint that may save a store reads
Key = tuple[int, int, int, str]
SCORE_SCALE = 1_000_000  # a score in a key (and a cursor) is an integer: micro-units of BM25


def rank_key(found: Match, entry: Entry) -> Key:
    """Sort ascending: phrase matches, then BM25 score, then newer, then by identity (stable paging)."""
    return (0 if found.phrase else 1, -round(found.score * SCORE_SCALE), -entry.seq, entry.store_id)


# --- cursors --------------------------------------------------------------------------------


def binding(*parts: object) -> str:
    """What a cursor is bound to: scope, thread (the agent's or subject's), query and filters."""
    return hashlib.sha256(json.dumps(parts, ensure_ascii=True).encode()).hexdigest()[:24]


def encode_cursor(cursors: Cursors, bound: str, snapshot: int, position: Sequence[object]) -> str:
    return cursors.seal(bound, {"s": snapshot, "p": list(position)})


def decode_cursor(cursors: Cursors, cursor: str, bound: str, size: int | None) -> tuple[int, list[Any]]:
    """(snapshot, position of `size` items, any with None) of a cursor sealed for the binding; InvalidEvent('cursor')
    otherwise."""
    raw = entries(cursors.open(cursor, bound))
    return whole(raw.get("s")), items(raw.get("p"), size)


# --- events into store operations ----------------------------------------------------------


@dataclass(frozen=True)
class InsertEntries:
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class ArchiveGeneration:
    """Archive every entry of the conversation older than `before` that is still in the transcript.

    A fold (kind compact) then takes `covers`' entries out of the active transcript; a reset takes all.
    """

    ref: ConversationRef
    archive_id: str
    kind: Literal["compact", "reset"]
    before: int
    covers: tuple[str, ...] = ()  # exchange ids a fold takes out


@dataclass(frozen=True)
class MoveConversation:
    ref: ConversationRef
    target: str
    before: int


@dataclass(frozen=True)
class ForkConversation:
    ref: ConversationRef
    target: str
    before: int
    entries: int
    occurred_at: int


@dataclass(frozen=True)
class SetMeta:
    ref: ConversationRef
    archived: bool | None = None
    protected: bool | None = None
    kind: str | None = None
    label: str | None = None


@dataclass(frozen=True)
class PurgeConversation:
    ref: ConversationRef
    before: int
    expect_last_seq: int | None = None
    retention: bool = False  # seed 004: a retention purge never touches main or an unfinished conversation
    generations_until: int | None = None  # only what folds or resets at this offset or before took out (generations)


ArchiveOp = InsertEntries | ArchiveGeneration | MoveConversation | ForkConversation | SetMeta | PurgeConversation


def conversation_ref(event: ThreadEvent) -> ConversationRef:
    env = event.envelope
    return ConversationRef(env.tenant, env.thread, env.owner, conversation_of(event))


def entry_of(event: ThreadEvent, position: Position) -> Entry | None:
    """The entry an exchange event or a fold's summary becomes; None for other events."""
    exchange_id: str | None
    original: str | None = None
    enters_prompt = True
    if isinstance(event, QuestionAsked):
        text, entry_id, role, original = event.question, f"{event.exchange_id}.q", "question", event.original
        exchange_id = event.exchange_id
    elif isinstance(event, ToolCalled):
        text = f"{event.name} {event.arguments} {event.result}"
        # seed 004: a call sent before its result is kept apart from the receipt that answers it (`.c`)
        receipt = "" if answered(event.ok, event.result) else ".c"
        entry_id, role, original = f"{event.exchange_id}.t{event.call_index}{receipt}", "tool", event.original
        exchange_id = event.exchange_id
    elif isinstance(event, AnswerGiven):
        text, entry_id, role, original = event.answer, f"{event.exchange_id}.a", "answer", event.original
        exchange_id = event.exchange_id
    elif isinstance(event, ThreadFolded):
        if event.segment and not event.summary:
            return None  # an asker's part of a shared thread's summary dropped: nothing to keep
        # 004: "The stored compaction summary is a debug entry marked entersPrompt: false"
        text, entry_id, role, exchange_id, enters_prompt = (
            event.summary,
            # a shared thread's fold is one part per asker, all of one fold id
            f"fold.{event.fold_id}.{position.offset}" if event.segment else f"fold.{event.fold_id}",
            "summary",
            None,
            False,
        )
    else:
        return None
    env = event.envelope
    terms, cut = capped_terms(text)
    return Entry(
        ref=conversation_ref(event),
        entry_id=entry_id,
        store_id=f"{position.topic}:{position.partition}:{position.offset}",
        seq=position.offset,
        exchange_id=exchange_id,
        role=role,
        occurred_at=env.occurred_at,
        text=text,
        original=original,
        subject=env.subject,
        agent=env.agent,
        enters_prompt=enters_prompt,
        terms=terms,
        terms_cut=cut,
    )


def archived_form(event: ThreadEvent) -> ThreadEvent | None:
    """The event as the archives keep it; None when they keep nothing of it.

    Seed 000: the public thread "keeps the answers but not the tool results, which only the asker may
    see". Its archive is read by anyone with the tenant's credential, so a public tool call is never
    archived, and a public question's original (the request as received) is dropped when the request
    carried tool calls. A remember call recorded again without its forgotten fact's text is not archived:
    the archive keeps the original until a purge or an erasure.
    """
    if isinstance(event, ToolCalled) and is_forgotten_call(event.name, event.arguments):
        return None  # the session's copy lost a forgotten fact's text; the archive keeps its original
    if event.envelope.thread != PUBLIC_THREAD:
        return event
    if isinstance(event, ToolCalled):
        return None
    if isinstance(event, QuestionAsked) and event.original is not None and _carries_tool_calls(event.original):
        return replace(event, original=None)
    return event


def _carries_tool_calls(original: str) -> bool:
    try:
        body = json.loads(original)
    except (ValueError, RecursionError):
        return True  # not the JSON it should be: withheld rather than read wrongly
    return not isinstance(body, dict) or bool(body.get("tool_calls"))


def plan_archive(
    events: Sequence[tuple[ThreadEvent, Position]], *, fork_entries: int = FORK_ENTRIES
) -> list[ArchiveOp]:
    """The store operations for a run of events, in log order; consecutive entries go in one insert."""
    ops: list[ArchiveOp] = []
    pending: list[Entry] = []

    def flush() -> None:
        if pending:
            ops.append(InsertEntries(tuple(pending)))
            pending.clear()

    for logged, position in events:
        event = archived_form(logged)
        if event is None:
            continue
        ref = conversation_ref(event)
        at = position.offset
        if isinstance(event, QuestionAsked | ToolCalled | AnswerGiven):
            entry = entry_of(event, position)
            assert entry is not None
            pending.append(entry)
            continue
        flush()
        if isinstance(event, ThreadFolded):
            # 004: compaction "saves the full previous generation first", then adds its summary; the
            # parts of one fold of a shared thread make one generation, named by their fold id
            archive_id = f"compact:{event.fold_id}" if event.segment else f"compact@{at}"
            if event.covers:
                ops.append(ArchiveGeneration(ref, archive_id, "compact", at, tuple(event.covers)))
            summary = entry_of(event, position)
            if summary is not None:
                pending.append(summary)
        elif isinstance(event, ThreadReset):
            ops.append(ArchiveGeneration(ref, f"reset@{at}", "reset", at))
        elif isinstance(event, ThreadRenamed):
            ops.append(MoveConversation(ref, event.target, at))
        elif isinstance(event, ThreadForked):
            ops.append(
                ForkConversation(ref, event.target, at, min(event.entries, fork_entries), event.envelope.occurred_at)
            )
        elif isinstance(event, ThreadArchived):
            ops.append(SetMeta(ref, event.archived, event.protected, event.kind, event.label))
        elif isinstance(event, ThreadPurged):
            retention = event.reason == RETENTION_PURGE
            ops.append(PurgeConversation(ref, at, event.expect_last_seq, retention, event.generations_until))
    flush()
    return ops


def meta_after_entry(meta: ConversationMeta | None, entry: Entry) -> ConversationMeta:
    """The metadata once an entry lands (the reference the stores agree with)."""
    base = meta or ConversationMeta(
        ref=entry.ref,
        # only a session belongs to a subject; a shared thread's metadata must survive its askers' erasure
        subject=entry.subject if entry.ref.thread == SESSION_THREAD else None,
        kind="main" if entry.ref.conversation == MAIN_CONVERSATION else "task",
        created_at=entry.occurred_at,
        created_by=entry.seq,
    )
    if entry.seq <= base.last_seq:
        return base
    open_exchange = base.open_exchange
    if entry.role == "question":
        open_exchange = entry.exchange_id
    elif entry.role == "answer" and entry.exchange_id == open_exchange:
        open_exchange = None
    return replace(base, last_at=max(base.last_at, entry.occurred_at), last_seq=entry.seq, open_exchange=open_exchange)


def forked(source: Sequence[Entry], op: ForkConversation) -> list[Entry]:
    """Copies of the newest active entries of the source (oldest first), as the target's own entries."""
    active = [e for e in source if e.reset_at == NEVER and e.compacted_at == NEVER and e.seq < op.before]
    newest = sorted(active, key=lambda e: e.seq)[-op.entries :]
    target = replace(op.ref, conversation=op.target)
    return [
        replace(
            e,
            ref=target,
            store_id=f"{e.store_id}>fork@{op.before}",
            archives=(),
            forked_from=op.ref.conversation,
        )
        for e in newest
    ]


def neighbours_of(ordered: Sequence[Entry], seqs: Iterable[int], radius: int) -> dict[int, list[Entry]]:
    """Up to `radius` entries either side of each seq, from one ordered run of the conversation."""
    position = {entry.seq: index for index, entry in enumerate(ordered)}
    found: dict[int, list[Entry]] = {}
    for seq in seqs:
        at = position.get(seq)
        if at is None:
            found[seq] = []
            continue
        found[seq] = [*ordered[max(0, at - radius) : at], *ordered[at + 1 : at + 1 + radius]]
    return found


# --- export and search scope ----------------------------------------------------------------


def in_scope(entry: Entry, scope: Scope, snapshot: int) -> bool:
    """Normal search and export: active and compacted history since the latest reset; history adds reset archives."""
    if entry.seq > snapshot:
        return False
    return scope == "history" or entry.reset_at > snapshot


# --- retention ------------------------------------------------------------------------------

DAY_MS = 86_400_000


@dataclass(frozen=True)
class RetentionPolicy:
    """004: "When a session policy is explicitly enabled, fallback kind ages are main 60 days, task 30
    days and subagent 7 days." Disabled until enabled."""

    enabled: bool = False
    days: Mapping[str, float] = field(default_factory=lambda: {"main": 60, "task": 30, "subagent": 7})
    generation_ms: int = 60 * DAY_MS  # a generation of main's, from its newest entry (projections/generations.py)

    def keep_ms(self) -> int:
        """The longest a conversation, or a generation of main's, is kept once enabled."""
        return max(round(max(self.days.values()) * DAY_MS), self.generation_ms)


@dataclass(frozen=True)
class RetentionTarget:
    meta: ConversationMeta
    age_days: float

    def view(self) -> dict[str, Any]:
        return {**self.meta.view(), "tenant": self.meta.ref.tenant, "age_days": round(self.age_days, 2)}


RETENTION_PURGE = "retention"  # the reason a ThreadPurged of retention carries
FINISHED_KINDS_ONLY = frozenset({"task", "subagent"})  # purged by retention only once archived (finished)


def retention_purge_refusal(meta: ConversationMeta | None, conversation: str) -> str | None:
    """Why a retention purge may not touch this conversation (seed 004: "never main or a running
    conversation"; a task or subagent conversation only once finished, its terminal marker set by archive).
    Checked where a purge is asked for and again where it is applied, so a purge put on the log by another
    producer is refused too."""
    if conversation == MAIN_CONVERSATION:
        return "the current conversation (main) is never purged by retention"
    if meta is None:
        return None
    if meta.running:
        return "running: a question is waiting for its answer"
    if meta.kind in FINISHED_KINDS_ONLY and not meta.archived:
        return f"a {meta.kind} conversation not finished yet (archive it to mark it finished)"
    return None


def retention_reason(meta: ConversationMeta, policy: RetentionPolicy, now_ms: int) -> str | None:
    """Why the conversation is kept; None when retention may delete it."""
    if not policy.enabled:
        return "retention is disabled"
    refused = retention_purge_refusal(meta, meta.ref.conversation)
    if refused is not None:
        return refused
    if meta.protected:
        return "protected"
    days = policy.days.get(meta.kind)
    if days is None:
        return f"no policy for kind {meta.kind!r}"
    if now_ms - meta.last_at < days * DAY_MS:
        return f"younger than {days} days"
    return None


def plan_retention(metas: Iterable[ConversationMeta], policy: RetentionPolicy, now_ms: int) -> list[RetentionTarget]:
    """The conversations a confirmed run would delete, oldest first; the run re-checks each before deleting."""
    targets = [
        RetentionTarget(meta, (now_ms - meta.last_at) / DAY_MS)
        for meta in metas
        if retention_reason(meta, policy, now_ms) is None
    ]
    return sorted(targets, key=lambda t: (t.meta.last_at, t.meta.ref))
