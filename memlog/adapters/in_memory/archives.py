"""In-process conversation archives and idempotency keys (MongoDB's are in memlog/adapters/mongo_archives.py)."""

from __future__ import annotations

import copy
import datetime as dt
import itertools
from collections.abc import Callable, Sequence
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
    retention_purge_refusal,
)
from projections.generations import GenerationAge, generation_ages, generations_kept, taken_at
from projections.ports import PENDING_SECONDS, Clock, utc_now
from projections.postings import Within, impacts
from projections.ranking import exchange_of
from schemas.events import MAIN_CONVERSATION


class InMemoryConversationArchive:
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
        if op.generations_until is not None:
            self._purge_generations(op, op.generations_until, meta)
            return
        if op.expect_last_seq is not None and (meta is None or meta.last_seq != op.expect_last_seq):
            return
        if op.retention and retention_purge_refusal(meta, op.ref.conversation) is not None:
            return
        for entry in self._of(op.ref, op.before):
            del self._entries[entry.store_id]
        if meta is not None and meta.last_seq < op.before:
            del self._metas[op.ref]

    def _purge_generations(self, op: PurgeConversation, until: int, meta: ConversationMeta | None) -> None:
        for entry in self._of(op.ref, op.before):
            if taken_at(entry) <= until:
                del self._entries[entry.store_id]
        if meta is not None:
            remaining = [e for e in self._entries.values() if e.ref == op.ref]
            self._metas[op.ref] = replace(meta, generations=generations_kept(meta.generations, remaining))

    async def generation_ages(self, ref: ConversationRef) -> list[GenerationAge]:
        return generation_ages(e for e in self._entries.values() if e.ref == ref)

    async def meta(self, ref: ConversationRef) -> ConversationMeta | None:
        return self._metas.get(ref)

    async def tenants(self) -> list[str]:
        return sorted({m.ref.tenant for m in self._metas.values()})

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
        limit: int | None = None,
    ) -> list[Entry]:
        return [
            e
            for e in self._exchanges_sharing(terms, lambda e: e.ref.tenant == tenant, limit)
            if (e.ref.thread, e.ref.owner) == (thread, owner)
            and conversation in (None, e.ref.conversation)
            and in_scope(e, scope, snapshot)
            and (since is None or e.occurred_at >= since)
            and (until is None or e.occurred_at < until)
        ]

    def _exchanges_sharing(
        self, terms: list[str], within: Callable[[Entry], bool], limit: int | None = None
    ) -> list[Entry]:
        """The entries of every exchange one of whose entries shares a term (all without terms), as the
        MongoDB archive's groups hold them; of the first `limit` exchanges when given."""
        wanted = set(terms)
        held = [e for e in self._entries.values() if within(e)]
        hit = {(e.ref, e.exchange_id) for e in held if e.exchange_id is not None and wanted & set(e.terms)}
        found = [
            e
            for e in held
            if not wanted or wanted & set(e.terms) or (e.exchange_id is not None and (e.ref, e.exchange_id) in hit)
        ]
        if limit is None:
            return found
        units = list(dict.fromkeys(exchange_of(e) for e in found))[:limit]
        kept = set(units)
        return [e for e in found if exchange_of(e) in kept]

    async def across(
        self, tenant: str, terms: list[str], *, agent: str | None, limit: int | None = None
    ) -> list[Entry]:
        """ArchiveSearch: the in-memory archive searches its own entries."""
        return self._exchanges_sharing(terms, lambda e: e.ref.tenant == tenant and agent in (None, e.agent), limit)

    async def bounded(
        self, tenant: str, terms: list[str], *, agent: str | None, per_term: int, limit: int | None = None
    ) -> tuple[list[Entry], bool]:
        """ArchiveSearch: a common term's exchanges cut to those where it weighs most, as postings are read."""
        mine = (lambda e: e.agent == agent) if agent is not None else (lambda _: True)
        return self._bounded(terms, lambda e: e.ref.tenant == tenant and mine(e), per_term, limit)

    async def bounded_candidates(
        self, tenant: str, thread: str, owner: str, terms: list[str], *, within: Within, per_term: int, limit: int
    ) -> tuple[list[Entry], bool]:
        """ConversationArchive: `candidates`, a common term's exchanges cut as postings are read."""
        conversation, snapshot = within

        def held(e: Entry) -> bool:
            place = (e.ref.tenant, e.ref.thread, e.ref.owner) == (tenant, thread, owner)
            return place and conversation in (None, e.ref.conversation) and e.seq <= snapshot

        return self._bounded(terms, held, per_term, limit)

    def _bounded(
        self, terms: list[str], within: Callable[[Entry], bool], per_term: int, limit: int | None
    ) -> tuple[list[Entry], bool]:
        mine = [e for e in self._entries.values() if within(e)]
        held = {(e.ref, e.entry_id) for e in mine}
        kept: set[tuple[ConversationRef, str]] = set()
        rare, cut = [], False
        for term in terms:
            weighs: dict[tuple[ConversationRef, str], int] = {}
            for entry in mine:
                impact = impacts(entry.text).get(term)
                if impact is not None:
                    weighs[exchange_of(entry)] = max(weighs.get(exchange_of(entry), 0), impact)
            if len(weighs) > per_term:
                cut = True
                kept |= set(sorted(weighs, key=lambda unit: -weighs[unit])[:per_term])
            else:
                rare.append(term)
        found = self._exchanges_sharing(rare, lambda e: (e.ref, e.entry_id) in held, limit) if rare else []
        seen = {(e.ref, e.entry_id) for e in found}
        found += [e for e in mine if exchange_of(e) in kept and (e.ref, e.entry_id) not in seen]
        return found, cut

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
        found = [
            e
            for e in self._entries.values()
            if e.ref == ref
            and after_seq < e.seq <= snapshot
            and (scope == "history" or (e.reset_at > snapshot) == (scope == "current"))
            and (since is None or e.occurred_at >= since)
            and (until is None or e.occurred_at < until)
        ]
        return sorted(found, key=lambda e: e.seq)[:limit]

    def _timed(
        self, tenant: str, thread: str, owner: str, conversation: str | None, scope: Scope, snapshot: int
    ) -> list[int]:
        return [
            e.occurred_at
            for e in self._entries.values()
            if (e.ref.tenant, e.ref.thread, e.ref.owner) == (tenant, thread, owner)
            and conversation in (None, e.ref.conversation)
            and in_scope(e, scope, snapshot)
        ]

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
        times = self._timed(tenant, thread, owner, conversation, scope, snapshot)
        return max((t for t in times if since <= t < until), default=None)

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
        times = self._timed(tenant, thread, owner, conversation, scope, snapshot)
        return [sum(start <= t < end for t in times) for start, end in itertools.pairwise(bounds)]

    async def occurrences(self, tenant: str, thread: str, owner: str, entry_id: str) -> list[Entry]:
        return [
            e
            for e in self._entries.values()
            if (e.ref.tenant, e.ref.thread, e.ref.owner, e.entry_id) == (tenant, thread, owner, entry_id)
        ]

    async def neighbours(
        self,
        ref: ConversationRef,
        seqs: list[int],
        radius: int,
        snapshot: int,
        known: Sequence[Entry] = (),  # noqa: ARG002 - a hint for stores that read; this one holds all
        texts: bool = True,  # noqa: ARG002 - a store in memory holds the texts at hand
    ) -> dict[int, list[Entry]]:
        ordered = sorted(
            (
                e if e.original is None else replace(e, original=None)
                for e in self._entries.values()
                if e.ref == ref and e.seq <= snapshot
            ),
            key=lambda e: e.seq,
        )
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


class InMemoryIdempotency:
    """Idempotency keys, remembered `ttl_seconds` by `clock` (MongoDB's TTL monitor deletes them later)."""

    def __init__(self, ttl_seconds: int, clock: Clock = utc_now) -> None:
        self._keys: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self._ttl = dt.timedelta(seconds=ttl_seconds)
        self._clock = clock

    def _held(self, claim: tuple[str, str, str, str], now: dt.datetime) -> dict[str, Any] | None:
        held = self._keys.get(claim)
        if held is not None and held["expires"] <= now:
            del self._keys[claim]
            return None
        return held

    async def reserve(
        self, tenant: str, thread: str, owner: str, key: str, subject: str | None, digest: str | None = None
    ) -> dict[str, Any] | None:
        now = self._clock()
        claim = (tenant, thread, owner, key)
        held = self._held(claim, now)
        renewed = {
            "pending_until": now + dt.timedelta(seconds=PENDING_SECONDS),
            "expires": now + self._ttl,
            "digest": digest,
        }
        if held is None:
            self._keys[claim] = {"tenant": tenant, "subject": subject, "state": "pending", **renewed}
            return None
        if held["state"] == "pending" and held["pending_until"] < now:
            held.update(renewed)  # the lapsed attempt's key is this call's now
            return None
        return copy.deepcopy(held)

    async def complete(self, tenant: str, thread: str, owner: str, key: str, accepted: dict[str, Any]) -> None:
        held = self._keys.get((tenant, thread, owner, key))
        if held is not None:
            held.update(state="done", accepted=copy.deepcopy(accepted))

    async def release(self, tenant: str, thread: str, owner: str, key: str) -> None:
        claim = (tenant, thread, owner, key)
        if self._keys.get(claim, {}).get("state") == "pending":
            del self._keys[claim]

    async def drop(self, tenant: str, thread: str, owner: str, key: str, accepted: dict[str, Any]) -> None:
        claim = (tenant, thread, owner, key)
        held = self._keys.get(claim, {})
        if held.get("state") == "done" and held.get("accepted") == accepted:
            del self._keys[claim]

    def _of(self, tenant: str, subject: str) -> list[tuple[str, str, str, str]]:
        return [claim for claim, held in self._keys.items() if held["tenant"] == tenant and held["subject"] == subject]

    async def erase_subject(self, tenant: str, subject: str) -> int:
        gone = self._of(tenant, subject)
        for claim in gone:
            del self._keys[claim]
        return len(gone)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        return [
            {name: copy.deepcopy(value) for name, value in self._keys[claim].items() if name != "expires"}
            for claim in self._of(tenant, subject)
        ]
