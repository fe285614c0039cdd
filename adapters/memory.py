"""In-process stores: the reference implementation of each interface, used by the pure and property tests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from projections.archives import (
    NEVER,
    ArchiveGeneration,
    ArchiveOp,
    ConversationMeta,
    ConversationRef,
    Entry,
    EntryScope,
    ForkConversation,
    InsertEntries,
    MoveConversation,
    PurgeConversation,
    Scope,
    SetMeta,
    forked,
    in_scope,
    meta_after_entry,
    neighbours_of,
)
from projections.facts import FactPolicy, SubjectFacts, questioned
from projections.ports import ArchivedEvent
from projections.position import Position
from projections.session import Exchange, Loaded, Session, SessionChange, SessionHead, SessionWrite, ThreadKey, after
from schemas.events import MAIN_CONVERSATION


class _MemoryCheckpoints:
    def __init__(self) -> None:
        self._applied: dict[tuple[str, int], int] = {}

    async def applied(self, topic: str, partition: int) -> int:
        return self._applied.get((topic, partition), -1)

    async def advance(self, position: Position) -> None:
        key = (position.topic, position.partition)
        self._applied[key] = max(self._applied.get(key, -1), position.offset)


class MemorySessionStore(_MemoryCheckpoints):
    def __init__(self) -> None:
        super().__init__()
        self._heads: dict[ThreadKey, tuple[SessionHead, int, int]] = {}  # head, applied offset, expires_at
        self._exchanges: dict[ThreadKey, dict[str, Exchange]] = {}
        self.now_ms = 0  # the clock reads consult; tests move it

    def _alive(self, key: ThreadKey) -> bool:
        entry = self._heads.get(key)
        if entry is None:
            return False
        if entry[2] <= self.now_ms:
            self._heads.pop(key, None)
            self._exchanges.pop(key, None)
            return False
        return True

    async def load(self, wanted: list[tuple[ThreadKey, str]]) -> Loaded:
        loaded: dict[tuple[ThreadKey, str], tuple[SessionHead | None, Exchange | None]] = {}
        for key, exchange_id in wanted:
            if self._alive(key):
                loaded[(key, exchange_id)] = (self._heads[key][0], self._exchanges[key].get(exchange_id))
            else:
                loaded[(key, exchange_id)] = (None, None)
        return loaded

    async def write(self, writes: list[SessionWrite], now_ms: int) -> list[bool]:
        self.now_ms = max(self.now_ms, now_ms)
        results = []
        for write in writes:
            if write.key is None or write.change is None:
                await self.advance(write.position)
                results.append(True)
            else:
                results.append(self._write_one(write.key, write.change, write.position, now_ms))
        return results

    def _write_one(self, key: ThreadKey, change: SessionChange, position: Position, now_ms: int) -> bool:
        alive = self._alive(key)
        if alive and self._heads[key][1] >= position.offset:
            return False
        self._applied[(position.topic, position.partition)] = max(
            self._applied.get((position.topic, position.partition), -1), position.offset
        )
        if change.expires_at <= now_ms:
            return True
        if change.reset or not alive:
            self._heads[key] = (SessionHead(), -1, change.expires_at)
            self._exchanges[key] = {}
        held = self._exchanges[key]
        for exchange_id in change.remove:
            held.pop(exchange_id, None)
        if change.exchange is not None:
            held[change.exchange.exchange_id] = change.exchange
        self._heads[key] = (after(self._heads[key][0], change), position.offset, change.expires_at)
        return True

    async def read(self, key: ThreadKey) -> Session | None:
        if not self._alive(key):
            return None
        return Session(self._heads[key][0], tuple(self._exchanges[key].values()))

    async def drop(self, key: ThreadKey) -> None:
        self._heads.pop(key, None)
        self._exchanges.pop(key, None)


class MemoryArchiveStore:
    def __init__(self) -> None:
        self._events: dict[Position, ArchivedEvent] = {}

    async def append(self, events: list[ArchivedEvent]) -> int:
        new = 0
        for event in events:
            if event.position not in self._events:
                self._events[event.position] = event
                new += 1
        return new

    async def events(self, tenant: str, subject: str, thread: str) -> list[ArchivedEvent]:
        found = [e for e in self._events.values() if e.tenant == tenant and e.subject == subject and e.thread == thread]
        return sorted(found, key=lambda e: e.position)

    async def count(self, tenant: str) -> int:
        return sum(1 for e in self._events.values() if e.tenant == tenant)

    async def erase_subject(self, tenant: str, subject: str) -> int:
        gone = [p for p, e in self._events.items() if e.tenant == tenant and e.subject == subject]
        for position in gone:
            del self._events[position]
        return len(gone)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        found = sorted(
            (e for e in self._events.values() if e.tenant == tenant and e.subject == subject), key=lambda e: e.position
        )
        return [{"event_type": e.event_type, "occurred_at": e.occurred_at, "record": e.record} for e in found]


class MemoryFactStore(_MemoryCheckpoints):
    def __init__(self) -> None:
        super().__init__()
        self._subjects: dict[tuple[str, str], tuple[SubjectFacts, int]] = {}  # state, applied offset

    async def load(self, tenant: str, subject: str) -> SubjectFacts | None:
        entry = self._subjects.get((tenant, subject))
        return entry[0] if entry else None

    async def write(self, tenant: str, subject: str, state: SubjectFacts, position: Position) -> bool:
        key = (tenant, subject)
        old = self._subjects.get(key)
        if old is not None and old[1] >= position.offset:
            return False
        if old is not None:
            state = replace(
                state,
                last_question_at=max(state.last_question_at, old[0].last_question_at),
                expires_at=max(state.expires_at, old[0].expires_at),
            )
        self._subjects[key] = (state, position.offset)
        return True

    async def write_many(self, items: list[tuple[str, str, SubjectFacts, Position]]) -> int:
        return sum([await self.write(*item) for item in items])

    async def questioned(self, asked: list[tuple[str, str, int]], keep_ms: int) -> None:
        for tenant, subject, at in asked:
            old = self._subjects.get((tenant, subject), (SubjectFacts(), -1))
            self._subjects[(tenant, subject)] = (questioned(old[0], at, FactPolicy(keep_ms=keep_ms)), old[1])


class MemoryConversationArchive:
    """The reference ConversationArchive: the same operations on dicts."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._metas: dict[ConversationRef, ConversationMeta] = {}

    async def apply(self, ops: list[ArchiveOp]) -> None:
        for op in ops:
            if isinstance(op, InsertEntries):
                await self.insert_entries(list(op.entries))
            elif isinstance(op, ArchiveGeneration):
                self._generation(op)
            elif isinstance(op, MoveConversation):
                self._move(op)
            elif isinstance(op, ForkConversation):
                self._fork(op)
            elif isinstance(op, SetMeta):
                self._set_meta(op)
            else:
                self._purge(op)

    def _taken(self, entry: Entry) -> bool:
        return entry.store_id in self._entries or any(
            e.ref == entry.ref and e.entry_id == entry.entry_id for e in self._entries.values()
        )

    async def insert_entries(self, entries: list[Entry]) -> None:
        for entry in entries:
            if not self._taken(entry):
                self._entries[entry.store_id] = entry
            meta = self._metas.get(entry.ref)
            self._metas[entry.ref] = meta_after_entry(meta, entry)

    def _of(self, ref: ConversationRef, before: int) -> list[Entry]:
        return [e for e in self._entries.values() if e.ref == ref and e.seq < before]

    def _generation(self, op: ArchiveGeneration) -> None:
        for held in self._of(op.ref, op.before):
            entry = held
            if entry.reset_at != NEVER:
                continue
            if op.kind == "reset":
                entry = replace(entry, reset_at=op.before, archives=_added(entry.archives, op.archive_id))
            elif entry.compacted_at == NEVER:
                entry = replace(entry, archives=_added(entry.archives, op.archive_id))
                if entry.exchange_id in op.covers:
                    entry = replace(entry, compacted_at=op.before)
            self._entries[entry.store_id] = entry
        meta = self._metas.get(op.ref)
        if meta is not None:
            self._metas[op.ref] = replace(
                meta,
                generations=_added(meta.generations, op.archive_id),
                open_exchange=None if op.kind == "reset" else meta.open_exchange,
            )

    def _claim(self, source: ConversationRef, target: str, before: int) -> ConversationRef | None:
        ref = replace(source, conversation=target)
        held = self._metas.get(ref)
        if held is not None:
            return ref if held.created_by == before else None
        base = self._metas.get(source) or ConversationMeta(ref=source)
        kind = "task" if source.conversation == MAIN_CONVERSATION and base.kind == "main" else base.kind
        self._metas[ref] = ConversationMeta(
            ref=ref,
            subject=base.subject,
            kind=kind,
            created_at=base.created_at,
            created_by=before,
            last_at=base.last_at,
            label=base.label,
        )
        return ref

    def _move(self, op: MoveConversation) -> None:
        source = self._metas.get(op.ref)
        target = self._claim(op.ref, op.target, op.before)
        if target is None:
            return
        for entry in self._of(op.ref, op.before):
            self._entries[entry.store_id] = replace(entry, ref=target)
        if source is not None:
            self._metas[target] = replace(source, ref=target, created_by=op.before, open_exchange=None)
            if source.last_seq < op.before:
                del self._metas[op.ref]

    def _fork(self, op: ForkConversation) -> None:
        target = self._claim(op.ref, op.target, op.before)
        if target is None:
            return
        copies = forked(self._of(op.ref, op.before), op)
        for entry in copies:
            if not self._taken(entry):
                self._entries[entry.store_id] = entry
        if copies:
            meta = self._metas[target]
            self._metas[target] = replace(
                meta,
                last_seq=max(meta.last_seq, copies[-1].seq),
                last_at=max(meta.last_at, *(e.occurred_at for e in copies)),
            )

    def _set_meta(self, op: SetMeta) -> None:
        meta = self._metas.get(op.ref)
        if meta is None:
            return
        self._metas[op.ref] = replace(
            meta,
            archived=meta.archived if op.archived is None else op.archived,
            protected=meta.protected if op.protected is None else op.protected,
            kind=meta.kind if op.kind is None else op.kind,
            label=meta.label if op.label is None else op.label,
        )

    def _purge(self, op: PurgeConversation) -> None:
        meta = self._metas.get(op.ref)
        if op.expect_last_seq is not None and (meta is None or meta.last_seq != op.expect_last_seq):
            return
        for entry in self._of(op.ref, op.before):
            del self._entries[entry.store_id]
        if meta is not None and meta.last_seq < op.before:
            del self._metas[op.ref]

    async def meta(self, ref: ConversationRef) -> ConversationMeta | None:
        return self._metas.get(ref)

    async def conversations(
        self, tenant: str, thread: str | None = None, owner: str | None = None
    ) -> list[ConversationMeta]:
        found = [
            m
            for m in self._metas.values()
            if m.ref.tenant == tenant and thread in (None, m.ref.thread) and owner in (None, m.ref.owner)
        ]
        return sorted(found, key=lambda m: m.last_at)

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
        wanted = set(terms)
        return [
            e
            for e in self._entries.values()
            if (e.ref.tenant, e.ref.thread, e.ref.owner) == (tenant, thread, owner)
            and conversation in (None, e.ref.conversation)
            and in_scope(e, scope, snapshot)
            and (not wanted or wanted & set(e.terms))
            and (since is None or e.occurred_at >= since)
            and (until is None or e.occurred_at < until)
        ]

    async def entries(
        self, ref: ConversationRef, *, scope: EntryScope, snapshot: int, after_seq: int = -1, limit: int = 500
    ) -> list[Entry]:
        found = [
            e
            for e in self._entries.values()
            if e.ref == ref
            and after_seq < e.seq <= snapshot
            and (scope == "history" or (e.reset_at > snapshot) == (scope == "current"))
        ]
        return sorted(found, key=lambda e: e.seq)[:limit]

    async def occurrences(self, tenant: str, thread: str, owner: str, entry_id: str) -> list[Entry]:
        return [
            e
            for e in self._entries.values()
            if (e.ref.tenant, e.ref.thread, e.ref.owner, e.entry_id) == (tenant, thread, owner, entry_id)
        ]

    async def neighbours(
        self, ref: ConversationRef, seqs: list[int], radius: int, snapshot: int
    ) -> dict[int, list[Entry]]:
        ordered = sorted((e for e in self._entries.values() if e.ref == ref and e.seq <= snapshot), key=lambda e: e.seq)
        return neighbours_of(ordered, seqs, radius)

    async def erase_subject(self, tenant: str, subject: str) -> int:
        gone = [k for k, e in self._entries.items() if e.ref.tenant == tenant and e.subject == subject]
        metas = [k for k, m in self._metas.items() if k.tenant == tenant and m.subject == subject]
        for key in gone:
            del self._entries[key]
        for ref in metas:
            del self._metas[ref]
        return len(gone) + len(metas)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        found = sorted(
            (e for e in self._entries.values() if e.ref.tenant == tenant and e.subject == subject),
            key=lambda e: e.seq,
        )
        return [{**e.view(), "original": e.original} for e in found]


def _added(items: tuple[str, ...], item: str) -> tuple[str, ...]:
    return items if item in items else (*items, item)
