"""In-process stores for what Redis and the namespace's MongoDB collections hold: checkpoints,
sessions, counters, facts and traces."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from projections.exports import subject_threads
from projections.facts import FactPolicy, SubjectFacts, questioned
from projections.ports import FACT_SLOT_SECONDS, Clock, HeldFacts, utc_now
from projections.position import Position
from projections.ready import ReadyThread, thread_version
from projections.session import (
    Exchange,
    Loaded,
    Session,
    SessionChange,
    SessionHead,
    SessionWrite,
    ThreadKey,
    after,
)
from projections.traces import Served, merge_served, served_threads
from schemas.events import AUTOMATION_THREAD, PUBLIC_THREAD


class InMemoryCheckpoints:
    def __init__(self) -> None:
        self._applied: dict[tuple[str, int], int] = {}

    async def applied(self, topic: str, partition: int) -> int:
        return self._applied.get((topic, partition), -1)

    async def applied_many(self, topic: str, partitions: Sequence[int]) -> list[int]:
        return [self._applied.get((topic, partition), -1) for partition in partitions]

    async def advance(self, position: Position) -> None:
        key = (position.topic, position.partition)
        self._applied[key] = max(self._applied.get(key, -1), position.offset)

    async def advance_many(self, positions: Sequence[Position]) -> None:
        for position in positions:
            await self.advance(position)


class InMemorySessionStore(InMemoryCheckpoints):
    def __init__(self) -> None:
        super().__init__()
        self._heads: dict[ThreadKey, tuple[SessionHead, int, int]] = {}  # head, applied offset, expires_at
        self._exchanges: dict[ThreadKey, dict[str, Exchange]] = {}
        self._edits: dict[ThreadKey, int] = {}  # changes made outside the log's order (erased lines)
        self._served: dict[ThreadKey, Served] = {}  # served marks
        self._marks_complete = False
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

    async def versions(self, keys: list[ThreadKey]) -> dict[ThreadKey, str | None]:
        return {
            key: thread_version(self._heads[key][1], self._edits.get(key, 0)) if self._alive(key) else None
            for key in keys
        }

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
            self._edits.pop(key, None)
        held = self._exchanges[key]
        for exchange_id in change.remove:
            held.pop(exchange_id, None)
        if change.exchange is not None:
            held[change.exchange.exchange_id] = change.exchange
        self._heads[key] = (after(self._heads[key][0], change, position.offset), position.offset, change.expires_at)
        return True

    async def read(self, key: ThreadKey) -> Session | None:
        if not self._alive(key):
            return None
        return Session(self._heads[key][0], tuple(self._exchanges[key].values()))

    async def read_ready(self, key: ThreadKey) -> ReadyThread | None:
        session = await self.read(key)
        if session is None:
            return None
        version = thread_version(self._heads[key][1], self._edits.get(key, 0))
        mark = self._served.get(key)
        served = None if mark is None or mark.until_ms <= self.now_ms else mark.links
        return replace(ReadyThread.of_session(key, session, version), served=served)

    async def mark_served(self, served: dict[ThreadKey, Served]) -> None:
        self._served = merge_served(self._served, served)

    async def served_marks_complete(self) -> bool:
        return self._marks_complete

    async def complete_served_marks(self) -> None:
        self._marks_complete = True

    async def drop(self, key: ThreadKey) -> None:
        self._heads.pop(key, None)
        self._exchanges.pop(key, None)
        self._edits.pop(key, None)

    def _shared_threads(self, tenant: str) -> list[ThreadKey]:
        """The tenant's public thread and automation threads, public first, as the Redis store lists them."""
        found = [
            key
            for key in list(self._heads)
            if key.tenant == tenant and key.thread in (PUBLIC_THREAD, AUTOMATION_THREAD) and self._alive(key)
        ]
        return sorted(found, key=lambda key: (key.thread != PUBLIC_THREAD, key.owner))

    async def erase_subject(self, tenant: str, subject: str) -> dict[str, int]:
        session = ThreadKey.session(tenant, subject)
        exchanges = len(self._exchanges[session]) if self._alive(session) else 0
        await self.drop(session)
        self._served.pop(session, None)
        lines = summaries = 0
        for key in self._shared_threads(tenant):
            held = self._exchanges[key]
            gone = [exchange for exchange in held.values() if exchange.subject == subject]
            for exchange in gone:
                del held[exchange.exchange_id]
            head, position, expires_at = self._heads[key]
            parts = [segment for segment in head.segments if segment.asker == subject]
            tokens = head.tokens - sum(exchange.tokens for exchange in gone) - sum(part.tokens for part in parts)
            segments = tuple(segment for segment in head.segments if segment.asker != subject)
            head = replace(head, tokens=tokens, count=head.count - len(gone), segments=segments)
            self._heads[key] = (head, position, expires_at)
            if gone or parts:
                self._edits[key] = self._edits.get(key, 0) + 1
            lines += len(gone)
            summaries += len(parts)
        return {"session_exchanges": exchanges, "shared_thread_lines": lines, "shared_thread_summaries": summaries}

    async def export_subject(self, tenant: str, subject: str) -> dict[str, Any]:
        session = await self.read(ThreadKey.session(tenant, subject))
        shared = [
            (key, Session(self._heads[key][0], tuple(self._exchanges[key].values())))
            for key in self._shared_threads(tenant)
        ]
        return subject_threads(subject, session, shared)


class InMemoryCounters:
    def __init__(self) -> None:
        self._dead_letters: dict[str, int] = {}

    async def count_dead_letter(self, topic: str) -> None:
        self._dead_letters[topic] = self._dead_letters.get(topic, 0) + 1

    async def dead_letters(self) -> dict[str, int]:
        return dict(self._dead_letters)


class InMemoryFactStore(InMemoryCheckpoints):
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

    async def erase_subject(self, tenant: str, subject: str) -> int:
        gone = self._subjects.pop((tenant, subject), None)
        return 0 if gone is None else len(gone[0].facts)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        state = await self.load(tenant, subject)
        return [] if state is None else [fact.view() for fact in state.facts]


class InMemoryTraceStore(InMemoryCheckpoints):
    def __init__(self) -> None:
        super().__init__()
        self._runs: dict[str, dict[str, Any]] = {}  # by the document's `_id`

    async def append(self, docs: list[dict[str, Any]]) -> int:
        new = [doc for doc in docs if doc["_id"] not in self._runs]
        for doc in new:
            self._runs[doc["_id"]] = copy.deepcopy(doc)
        return len(new)

    def _live(self, tenant: str, now_ms: int) -> list[dict[str, Any]]:
        return [doc for doc in self._runs.values() if doc["tenant"] == tenant and doc["expires_at"] > now_ms]

    async def get(self, tenant: str, run_id: str, now_ms: int) -> dict[str, Any] | None:
        found = [doc for doc in self._live(tenant, now_ms) if doc["run_id"] == run_id]
        return copy.deepcopy(found[0]) if found else None

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
        found = [
            doc
            for doc in self._live(tenant, now_ms)
            if (before is None or (doc["started_at"], doc["run_id"]) < before)
            and agent in (None, doc["agent"])
            and status in (None, doc["status"])
            and (since is None or doc["started_at"] >= since)
            and (until is None or doc["started_at"] < until)
        ]
        found.sort(key=lambda doc: (doc["started_at"], doc["run_id"]), reverse=True)
        return copy.deepcopy(found[:limit])

    async def served_threads(self, now_ms: int) -> dict[ThreadKey, Served]:
        return served_threads(self._runs.values(), now_ms)

    async def served(self, tenant: str, thread: str, exchange_ids: list[str], now_ms: int) -> list[dict[str, Any]]:
        wanted = set(exchange_ids)
        return [
            {k: doc.get(k) for k in ("run_id", "exchange_id", "call_index", "started_at")}
            for doc in self._live(tenant, now_ms)
            if doc.get("exchange_id") in wanted and doc.get("exchange_thread") == thread
        ]

    def _of(self, tenant: str, subject: str) -> list[str]:
        return [key for key, doc in self._runs.items() if doc["tenant"] == tenant and doc["subject"] == subject]

    async def erase_subject(self, tenant: str, subject: str) -> int:
        gone = self._of(tenant, subject)
        for key in gone:
            del self._runs[key]
        return len(gone)

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(self._runs[key]) for key in self._of(tenant, subject)]


class InMemoryFactSlots:
    """Fact reservations per subject, lapsing by `clock`."""

    def __init__(self, clock: Clock = utc_now) -> None:
        self._pending: dict[tuple[str, str], dict[str, dt.datetime]] = {}
        self._versions: dict[tuple[str, str], int] = {}
        self._clock = clock

    async def reserve(self, tenant: str, subject: str, fact_id: str, held: HeldFacts, limit: int) -> bool:
        key = (tenant, subject)
        while True:  # compare-and-set, as MongoFactSlots does: `held()` may let other reservations run
            now = self._clock()
            version = self._versions.get(key, 0)
            reserved = dict(self._pending.get(key, {}))
            applied = set(await held())  # after the reservations: see HeldFacts
            if self._versions.get(key, 0) != version:
                continue
            pending = {fid: at for fid, at in reserved.items() if fid not in applied and at > now}
            if len(applied) + len(pending) >= limit:
                return False
            pending[fact_id] = now + dt.timedelta(seconds=FACT_SLOT_SECONDS)
            self._pending[key] = pending
            self._versions[key] = version + 1
            return True

    async def release(self, tenant: str, subject: str, fact_id: str) -> None:
        self._pending.get((tenant, subject), {}).pop(fact_id, None)

    async def erase_subject(self, tenant: str, subject: str) -> int:
        return 1 if self._pending.pop((tenant, subject), None) is not None else 0
