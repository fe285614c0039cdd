"""Conversation archives for the API and the CLI: search, export, originals, operations, retention.

The rules are in projections/archives.py; this module only loads what they need and produces events.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from memlog.app.evidence import Evidence
from memlog.app.nearest import Near, nearest, ranked, started
from memlog.app.positions import Ready, at_once
from memlog.app.ranker import Ranker, centres, off_loop
from projections.archives import (
    EXPORT_PAGE_MAX,
    MAX_NEIGHBOUR_RADIUS,
    MAX_RESULTS,
    RETENTION_PURGE,
    ConversationRef,
    Entry,
    Key,
    RetentionPolicy,
    Scope,
    binding,
    decode_cursor,
    encode_cursor,
    excerpt,
    in_scope,
    parse_thread,
    retention_purge_refusal,
    thread_ref,
)
from projections.calendar import FIRST_MS, LAST_MS, calendar_window, clamp, narrow, zone
from projections.cursors import Cursors, whole
from projections.hybrid import SimilarEntries
from projections.ports import ConversationArchive, Idempotency, Ledger
from projections.position import Position
from projections.postings import per_term
from projections.ranking import Grouping, Hit, partial, search_position
from projections.relevance import query_of
from projections.search import in_window
from projections.session import ThreadKey
from schemas.errors import InvalidEvent, NotFound, NothingToDo, TargetExists
from schemas.events import (
    KEY_SEPARATOR,
    MAIN_CONVERSATION,
    SESSION_THREAD,
    ThreadArchived,
    ThreadEvent,
    ThreadForked,
    ThreadPurged,
    ThreadRenamed,
    ThreadReset,
    check_name,
)
from streams.folds import FoldService
from streams.producer import EventProducer
from streams.retention import apply_retention, envelope_for

log = logging.getLogger(__name__)
PROVENANCE_ORDER = {"active": 0, "compacted": 1, "reset": 2}


def conversation_ref(tenant: str, thread: str, conversation: str = MAIN_CONVERSATION) -> ConversationRef:
    """A conversation as the API's paths and the CLI's arguments name it; `thread` as parse_thread reads it."""
    kind, owner = parse_thread(thread)
    return ConversationRef(check_name("tenant", tenant), kind, owner, check_name("conversation", conversation))


async def named(conversation: str | None, ready: Ready) -> None:
    """A read's conversation filter, by the name rule; then `ready`, the request's wait for `after`: a bad
    name waits for nothing."""
    if conversation is not None:
        check_name("conversation", conversation)
    await ready()


async def ready_ref(
    tenant: str, thread: str, conversation: str = MAIN_CONVERSATION, *, ready: Ready
) -> ConversationRef:
    """The conversation a request names (as conversation_ref reads it), once `ready`, the request's wait for
    `after`, is over: a bad name waits for nothing."""
    ref = conversation_ref(tenant, thread, conversation)
    await ready()
    return ref


def target_key(conversation: str) -> str:
    """The claim a fork or rename holds on its target's name; beside the thread's idempotency keys, which
    are names and so hold no separator, it can never equal one of them."""
    return f"{KEY_SEPARATOR}conversation{KEY_SEPARATOR}{conversation}"


def _brief(entry: Entry, at: int, snapshot: int) -> dict[str, Any]:
    view = entry.view(snapshot)
    view["excerpt"] = excerpt(view.pop("text"), at)
    return view


def _shown(
    scope: Scope, snapshot: int, conversation: str | None, since: int | None, until: int | None
) -> Callable[[Entry], bool]:
    """What a thread's search shows of the entries it did not read by their words (its nearest by vector)."""

    def shown(entry: Entry) -> bool:
        return (
            in_scope(entry, scope, snapshot)
            and (conversation is None or entry.ref.conversation == conversation)
            and (since is None or entry.occurred_at >= since)
            and (until is None or entry.occurred_at < until)
        )

    return shown


@dataclass
class Conversations:
    """Args:
    store: the conversation archive.
    producer: where operations are produced (None for read-only use).
    producer_name: the envelope's producer.
    fork_entries: MEMLOG_FORK_ENTRIES.
    folds: the session fold, for compact (built on first use: a summarizer is needed only then).
    cursors: seals and opens the cursors of search, calendar and export.
    """

    store: ConversationArchive
    producer: EventProducer | None
    producer_name: str
    fork_entries: int = 200
    folds: Callable[[], FoldService] | None = None
    claims: Idempotency | None = None  # the names forks and renames take, reserved when they are accepted
    archived: Callable[[Position], Awaitable[bool]] | None = None  # whether the archive has applied a position
    evidence: Evidence | None = None  # tool entries' run_id (seed 004, evidence); None: not joined
    search_candidates: int = 1000  # MEMLOG_SEARCH_MAX_CANDIDATES: exchanges a search reads at most
    similar: SimilarEntries | None = None  # the archive's vectors (MEMLOG_SEARCH_VECTORS); None: words alone
    ledger: Ledger | None = None  # where a confirmed retention run records each purge
    cursors: Cursors = field(kw_only=True)
    ranker: Ranker | None = field(default=None, kw_only=True)  # where a search ranks; None: in a thread
    # MEMLOG_SEARCH_MEANING_MIN: the cosine the nearest exchange must exceed to answer a question none of
    # whose words the thread holds (None: such a question answers nothing)
    meaning_min: float | None = field(default=None, kw_only=True)

    async def snapshot(self, tenant: str, thread: str, owner: str) -> int:
        """The newest entry the archive holds for the thread: later appends fall outside a paging run."""
        metas = await self.store.conversations(tenant, thread, owner)
        return max((m.last_seq for m in metas), default=-1)

    async def known(self, ref: ConversationRef) -> None:
        """404 naming the conversation when the archive holds none by that name (never applied, renamed
        away or purged); `main`, the current conversation, always exists, empty until its first entry."""
        if ref.conversation != MAIN_CONVERSATION and await self.store.meta(ref) is None:
            raise NotFound(f"no conversation {ref.conversation!r} in {thread_ref(ref.thread, ref.owner)}")

    # --- search -----------------------------------------------------------------------------

    async def search(
        self,
        tenant: str,
        thread: str,
        owner: str,
        query: str,
        *,
        scope: Scope = "current",
        conversation: str | None = None,
        since: int | None = None,
        until: int | None = None,
        radius: int = 1,
        limit: int = 20,
        cursor: str | None = None,
        day: str | None = None,
        tz: str | None = None,
        group: Grouping = "exchange",
        ready: Ready = at_once,
    ) -> dict[str, Any]:
        """`day` (YYYY-MM-DD in `tz`, UTC by default) narrows since/until to that local day (intersected).
        One result per exchange (`group`), ranked by BM25 over the thread's exchanges (projections/ranking.py)."""
        await named(conversation, ready)
        if not query.strip():
            raise InvalidEvent("q", "must not be empty")
        since, until = narrow(since, until, day, tz)
        if not 0 <= radius <= MAX_NEIGHBOUR_RADIUS:
            raise InvalidEvent("neighbours", f"must be 0 to {MAX_NEIGHBOUR_RADIUS}")
        if not 1 <= limit <= MAX_RESULTS:
            raise InvalidEvent("limit", f"must be 1 to {MAX_RESULTS}")
        bound = binding("search", tenant, thread, owner, scope, conversation, query, since, until, group)
        asked = query_of(query)  # InvalidEvent('q') past MAX_QUERY_TERMS
        after: Key | None = None
        documents: int | None = None
        if cursor:
            snapshot, position = decode_cursor(self.cursors, cursor, bound, None)
            after, documents = search_position(position)
        elif conversation is not None:
            await self.known(ConversationRef(tenant, thread, owner, conversation))
        # the question's vector and the scope's nearest, meanwhile: the snapshot's read, the candidates'
        meaning = started(self.similar, tenant, query, thread=(thread, owner)) if asked.terms else None
        if not cursor:
            snapshot = await self.snapshot(tenant, thread, owner)
        candidates: list[Entry] = []
        cut = False
        if asked.terms:  # no word at all: nothing the index can find, and the archive is never read whole
            # a common word's exchanges cut to those where it weighs most (postings), the result partial
            found, cut = await self.store.bounded_candidates(
                tenant,
                thread,
                owner,
                asked.lookup,
                within=(conversation, snapshot),
                per_term=per_term(limit),
                limit=self.search_candidates + 1,
            )
            candidates = in_window(found, scope, snapshot, since, until)
        if documents is None:
            documents = await self.documents(tenant, thread, owner, candidates)
        meant = await nearest(meaning, candidates, self.meaning_min)  # by meaning too
        shown = _shown(scope, snapshot, conversation, since, until)
        hits = await ranked(
            query,
            candidates,
            meant,
            shown,
            after=after,
            limit=limit + 1,
            documents=documents,
            group=group,
            ranker=self.ranker,
            floor=self.meaning_min,
        )
        more, hits = len(hits) > limit, hits[:limit]
        nearby = await self._nearby(hits, radius, snapshot, scope, candidates) if radius else {}
        near_all = [n for hit in hits for n in nearby.get((hit.entry.ref, hit.entry.seq), [])]
        at = iter(await off_loop(self.ranker, centres, query, [n.text for n in near_all]) if near_all else [])
        results = []
        for hit in hits:
            item = _brief(hit.entry, hit.found.at, snapshot)
            item["match"] = "phrase" if hit.found.phrase else "tokens"
            item["coverage"] = hit.found.coverage
            item["score"] = round(hit.found.score, 4)
            item["also"] = [{"entry_id": e.entry_id, "role": e.role, "seq": str(e.seq)} for e in hit.also]
            item["source_ref"] = {"entry_id": hit.entry.entry_id, "conversation": hit.entry.ref.conversation}
            item["neighbours"] = [_brief(n, next(at), snapshot) for n in nearby.get((hit.entry.ref, hit.entry.seq), [])]
            results.append(item)
        next_cursor = (
            encode_cursor(self.cursors, bound, snapshot, [*hits[-1].key, documents]) if more and hits else None
        )
        if self.evidence is not None:
            await self.evidence.entries(tenant, results, _known(candidates, near_all, meant))
        return {
            "query": query,
            "scope": scope,
            "snapshot": str(snapshot),
            "partial": cut or partial(candidates, self.search_candidates),
            "results": results,
            "next_cursor": next_cursor,
        }

    async def _nearby(
        self, hits: list[Hit], radius: int, snapshot: int, scope: Scope, candidates: list[Entry]
    ) -> dict[tuple[ConversationRef, int], list[Entry]]:
        """The entries either side of each hit in its conversation, in the snapshot and scope."""
        by_conversation: dict[ConversationRef, list[int]] = {}
        for hit in hits:
            by_conversation.setdefault(hit.entry.ref, []).append(hit.entry.seq)
        refs = list(by_conversation)
        reads = await asyncio.gather(
            *(self.store.neighbours(ref, by_conversation[ref], radius, snapshot, candidates) for ref in refs)
        )
        nearby: dict[tuple[ConversationRef, int], list[Entry]] = {}
        for ref, read in zip(refs, reads, strict=True):
            for seq, found in read.items():
                nearby[(ref, seq)] = [n for n in found if scope == "history" or n.reset_at > snapshot]
        return nearby

    async def documents(self, tenant: str, thread: str, owner: str, candidates: list[Entry]) -> int | None:
        """How many exchanges the thread holds, for BM25's idf: its entries (the conversations' counts of
        places) over the candidates' entries per exchange. None when a conversation has no count."""
        metas = await self.store.conversations(tenant, thread, owner)
        if not metas or any(m.entries is None for m in metas):
            return None
        exchanges = len({(e.ref, e.exchange_id or e.entry_id) for e in candidates})
        per = len({(e.ref, e.entry_id) for e in candidates}) / exchanges if exchanges else 1.0
        return round(sum(m.entries or 0 for m in metas) / max(per, 1.0))

    # --- calendar ---------------------------------------------------------------------------

    async def calendar(
        self,
        tenant: str,
        thread: str,
        owner: str,
        *,
        tz: str | None = None,
        scope: Scope = "current",
        conversation: str | None = None,
        since: int | None = None,
        until: int | None = None,
        cursor: str | None = None,
        ready: Ready = at_once,
    ) -> dict[str, Any]:
        """The local days (in `tz`, UTC by default) that have entries in scope, newest first, with their counts.

        One answer spans at most MAX_CALENDAR_DAYS days, ending with the day of the newest entry in
        [since, until); `next_cursor` goes on with older days (it skips a gap with no entries at once).
        Counted from one snapshot, as search is: entries appended after the first page are not in it.
        """
        await named(conversation, ready)
        zone_info = zone(tz)
        bound = binding("calendar", tenant, thread, owner, scope, conversation, zone_info.key, since, until)
        low = clamp(FIRST_MS if since is None else since)
        if cursor:
            snapshot, position = decode_cursor(self.cursors, cursor, bound, 1)
            high = whole(position[0])
        else:
            if conversation is not None:
                await self.known(ConversationRef(tenant, thread, owner, conversation))
            snapshot, high = await self.snapshot(tenant, thread, owner), LAST_MS if until is None else until
        high = clamp(high)
        answer: dict[str, Any] = {"tz": zone_info.key, "scope": scope, "snapshot": str(snapshot), "days": []}
        store = self.store

        async def newest(before: int) -> int | None:
            return await store.newest_time(
                tenant,
                thread,
                owner,
                conversation=conversation,
                scope=scope,
                snapshot=snapshot,
                since=low,
                until=before,
            )

        last = await newest(high)
        if last is None:
            return {**answer, "next_cursor": None}
        window = calendar_window(last, low, high, zone_info)
        counts = await store.count_between(
            tenant, thread, owner, window.bounds, conversation=conversation, scope=scope, snapshot=snapshot
        )
        spans = list(itertools.pairwise(window.bounds))
        for day, (start, end), count in reversed(list(zip(window.days, spans, counts, strict=True))):
            if count:
                answer["days"].append({"day": day.isoformat(), "entries": count, "start": start, "end": end})
        older = low < window.start and await newest(window.start) is not None
        return {
            **answer,
            "next_cursor": encode_cursor(self.cursors, bound, snapshot, [window.start]) if older else None,
        }

    # --- export and originals ---------------------------------------------------------------

    async def export(
        self,
        ref: ConversationRef,
        *,
        archives: str = "current",
        limit: int = EXPORT_PAGE_MAX,
        cursor: str | None = None,
        day: str | None = None,
        tz: str | None = None,
    ) -> dict[str, Any]:
        """004: compacted generations since the latest reset plus the active entries, from one snapshot;
        `archives=reset` pages the reset archives instead; `day` (in `tz`) keeps that local day's entries."""
        if archives not in ("current", "reset"):
            raise InvalidEvent("archives", "must be current or reset")
        if not 1 <= limit <= EXPORT_PAGE_MAX:
            raise InvalidEvent("limit", f"must be 1 to {EXPORT_PAGE_MAX}")
        since, until = narrow(None, None, day, tz)
        dated = () if day is None else (since, until)  # the cursor of an undated export reads as before
        bound = binding("export", ref.tenant, ref.thread, ref.owner, ref.conversation, archives, *dated)
        if cursor:
            snapshot, position = decode_cursor(self.cursors, cursor, bound, 1)
            after_seq = whole(position[0])
        else:
            await self.known(ref)
            meta = await self.store.meta(ref)
            snapshot, after_seq = (meta.last_seq if meta else -1), -1
        page = await self.store.entries(
            ref,
            scope="current" if archives == "current" else "reset",
            snapshot=snapshot,
            after_seq=after_seq,
            limit=limit,
            since=since,
            until=until,
        )
        items = [{**e.view(snapshot), "original": e.original} for e in page]
        if self.evidence is not None:
            await self.evidence.entries(ref.tenant, items)
        next_cursor = encode_cursor(self.cursors, bound, snapshot, [page[-1].seq]) if len(page) == limit else None
        return {
            "conversation": ref.conversation,
            "archives": archives,
            "snapshot": str(snapshot),
            "entries": items,
            "next_cursor": next_cursor,
        }

    async def original(
        self, tenant: str, thread: str, owner: str, entry_id: str, conversation: str | None
    ) -> Entry | None:
        """004: the live entry first, then its archived occurrence; one answer, never duplicates."""
        found = [
            e
            for e in await self.store.occurrences(tenant, thread, owner, entry_id)
            if conversation is None or e.ref.conversation == conversation
        ]
        if not found:
            return None
        return min(
            found,
            key=lambda e: (
                PROVENANCE_ORDER[e.provenance()],
                e.ref.conversation != MAIN_CONVERSATION,
                e.forked_from is not None,
                e.seq,
            ),
        )

    # --- operations -------------------------------------------------------------------------

    def _producer(self) -> EventProducer:
        if self.producer is None:
            raise InvalidEvent("producer", "this process was opened read-only")
        return self.producer

    async def _produce(self, event: ThreadEvent) -> Position:
        return await self._producer().produce([event])

    async def compact(self, ref: ConversationRef) -> Position:
        """Fold the current conversation now (the session fold); the whole previous generation is archived first."""
        await self.known(ref)
        if ref.conversation != MAIN_CONVERSATION:
            raise InvalidEvent(
                "conversation", "only the current conversation (main) is compacted; it is the one folded"
            )
        if self.folds is None:
            raise InvalidEvent("producer", "this process was opened read-only")
        position = await self.folds().fold(ThreadKey(ref.tenant, ref.thread, ref.owner), force=True)
        if position is None:
            raise NothingToDo("nothing to compact: the session keeps its newest exchanges and has no older ones")
        return position

    async def reset(self, ref: ConversationRef, reason: str | None = None) -> Position:
        await self.known(ref)
        conversation = None if ref.conversation == MAIN_CONVERSATION else ref.conversation
        return await self._produce(ThreadReset(envelope_for(ref, self.producer_name), reason, conversation))

    async def reset_session(self, tenant: str, subject: str, reason: str | None = None) -> Position:
        """A new session (seed 000 "/allay new"): the exchanges leave the active session; memories stay."""
        return await self.reset(ConversationRef(tenant, SESSION_THREAD, subject), reason)

    async def _free_target(self, ref: ConversationRef, target: str) -> None:
        check_name("target", target)
        if target == ref.conversation:
            raise InvalidEvent("target", f"is the source conversation {ref.conversation!r} itself")
        held = await self.store.meta(ConversationRef(ref.tenant, ref.thread, ref.owner, target))
        if held is not None or target == MAIN_CONVERSATION:
            raise TargetExists(f"conversation {target!r} exists already; choose another target")

    async def _claim_target(self, ref: ConversationRef, target: str) -> tuple[str, str, str, str] | None:
        """Reserve the target's name before the fork or rename is produced, so of two operations to one
        new name exactly one is accepted: the archive would drop the other when it applied it.

        A name stays reserved after its operation is accepted, until the archive has applied that
        operation: from then on the archive answers whether the name is free (it may have been purged
        or renamed away since), and the stale reservation is dropped. So the archive is read again
        once this call holds the name: a reservation is only ever dropped once the archive shows it.
        """
        await self.known(ref)
        await self._free_target(ref, target)
        if self.claims is None:
            return None
        claim = (ref.tenant, ref.thread, ref.owner, target_key(target))
        subject = ref.owner if ref.thread == SESSION_THREAD else None  # erased with the subject
        for _ in range(2):
            held = await self.claims.reserve(*claim, subject)
            if held is None:
                try:
                    await self._free_target(ref, target)
                except TargetExists:
                    await self.claims.release(*claim)
                    raise
                return claim
            accepted = held.get("accepted")
            if not accepted or self.archived is None or not await self.archived(Position.parse(accepted["position"])):
                break
            await self.claims.drop(*claim, accepted)  # applied: the archive answers for the name from now on
        raise TargetExists(
            f"conversation {target!r} is the target of a fork or rename accepted before this one; choose another"
        )

    async def _take_target(self, claim: tuple[str, str, str, str] | None, event: ThreadEvent) -> Position:
        try:
            position = await self._produce(event)
        except BaseException:
            if claim is not None and self.claims is not None:
                await self.claims.release(*claim)
            raise
        if claim is not None and self.claims is not None:
            await self.claims.complete(*claim, {"position": position.token()})
        return position

    async def rename(self, ref: ConversationRef, target: str) -> Position:
        claim = await self._claim_target(ref, target)
        event = ThreadRenamed(envelope_for(ref, self.producer_name), ref.conversation, target)
        return await self._take_target(claim, event)

    async def fork(self, ref: ConversationRef, target: str) -> Position:
        claim = await self._claim_target(ref, target)
        event = ThreadForked(envelope_for(ref, self.producer_name), ref.conversation, target, self.fork_entries)
        return await self._take_target(claim, event)

    async def archive(
        self,
        ref: ConversationRef,
        *,
        archived: bool | None = None,
        protected: bool | None = None,
        kind: str | None = None,
        label: str | None = None,
    ) -> Position:
        await self.known(ref)
        event = ThreadArchived(
            envelope_for(ref, self.producer_name), ref.conversation, archived, protected, kind, label
        )
        return await self._produce(event)

    async def purge(self, ref: ConversationRef, reason: str | None = None) -> Position:
        if reason == RETENTION_PURGE:
            refused = retention_purge_refusal(await self.store.meta(ref), ref.conversation)
            if refused is not None:
                raise InvalidEvent("reason", f"a retention purge of {ref.conversation!r} is refused: {refused}")
        return await self._produce(ThreadPurged(envelope_for(ref, self.producer_name), ref.conversation, reason))

    # --- retention --------------------------------------------------------------------------

    async def retention(
        self, tenant: str, policy: RetentionPolicy, now_ms: int, *, confirm: bool = False
    ) -> dict[str, Any]:
        """Dry run by default: the targets. Confirmed: each target is re-checked, then purged (the worker
        runs the same on its own every MEMLOG_RETENTION_CHECK_SECONDS)."""
        check_name("tenant", tenant)
        return await apply_retention(
            self.store,
            self._producer() if confirm else None,
            self.producer_name,
            tenant,
            policy,
            now_ms,
            confirm=confirm,
        )


def _known(candidates: list[Entry], near: list[Entry], meant: Near | None) -> list[Entry]:
    """What a search read of the archive, with places: its candidates, the results' neighbours and the
    nearest groups by meaning (whole), so that evidence reads near none of their exchanges again."""
    return [*candidates, *near, *(e for _, group in meant or () for e in group)]
