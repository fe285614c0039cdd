"""Search across threads (seed 004): an agent's explicit search over what it took part in, and an
operator's over every thread of a tenant. Results never enter a prompt (`enters_prompt: false`).

The rules are in projections/search.py and projections/archives.py; this module loads and shapes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from memlog.app.nearest import nearest, ranked, started
from memlog.app.positions import Ready, at_once
from memlog.app.ranker import Ranker, centres, off_loop
from projections.archives import (
    MAX_NEIGHBOUR_RADIUS,
    MAX_RESULTS,
    ConversationRef,
    Entry,
    Scope,
    binding,
    excerpt,
)
from projections.cursors import Cursors
from projections.hybrid import SimilarEntries
from projections.ports import ArchiveSearch, Checkpoints, ConversationArchive
from projections.postings import per_term
from projections.ranking import Grouping, Hit, partial
from projections.relevance import query_of
from projections.search import (
    Marks,
    across_key,
    decode_cursor,
    encode_cursor,
    marks_of,
    partition_of,
    topic_partition,
    visible,
)
from schemas.errors import InvalidEvent
from schemas.events import check_name


def _brief(entry: Entry, at: int, marks: Marks) -> dict[str, Any]:
    view = entry.view(marks.get(partition_of(entry), -1))
    view["excerpt"] = excerpt(view.pop("text"), at)
    view["agent"] = entry.agent
    view["enters_prompt"] = False  # 004: a search across threads is inspection, never prompt material
    return view


@dataclass
class CrossSearch:
    """Args:
    search: the candidates across threads (ArchiveSearch).
    archive: the conversation archive, for the neighbours of each result.
    checkpoints: the archive projection's, for the first page's snapshot (None: the candidates alone).
    cursors: seals and opens the cursors of both searches.
    """

    search: ArchiveSearch
    archive: ConversationArchive
    checkpoints: Checkpoints | None = None
    candidates: int = 1000  # MEMLOG_SEARCH_MAX_CANDIDATES: exchanges a search reads at most
    similar: SimilarEntries | None = None  # the archive's vectors (MEMLOG_SEARCH_VECTORS): an agent's search fuses
    cursors: Cursors = field(kw_only=True)
    ranker: Ranker | None = field(default=None, kw_only=True)  # where ranking runs; None: in a thread
    meaning_min: float | None = field(default=None, kw_only=True)  # MEMLOG_SEARCH_MEANING_MIN (conversations.py)

    async def agent(
        self, tenant: str, agent: str, query: str, *, ready: Ready = at_once, **options: Any
    ) -> dict[str, Any]:
        """The agent's explicit search over the entries it took part in, every thread of the tenant;
        `ready`: the request's wait for `after`, run once the names are checked."""
        check_name("agent", agent)
        check_name("tenant", tenant)
        await ready()
        return {"agent": agent, **await self._search(tenant, agent, query, **options)}

    async def tenant(self, tenant: str, query: str, *, ready: Ready = at_once, **options: Any) -> dict[str, Any]:
        """The operator's search over every thread of the tenant, whoever answered; `ready` as for agent."""
        check_name("tenant", tenant)
        await ready()
        return await self._search(tenant, None, query, **options)

    async def _search(
        self,
        tenant: str,
        agent: str | None,
        query: str,
        *,
        scope: Scope = "history",
        since: int | None = None,
        until: int | None = None,
        radius: int = 1,
        limit: int = 20,
        cursor: str | None = None,
        group: Grouping = "exchange",
    ) -> dict[str, Any]:
        check_name("tenant", tenant)
        if not query.strip():
            raise InvalidEvent("q", "must not be empty")
        if not 0 <= radius <= MAX_NEIGHBOUR_RADIUS:
            raise InvalidEvent("neighbours", f"must be 0 to {MAX_NEIGHBOUR_RADIUS}")
        if not 1 <= limit <= MAX_RESULTS:
            raise InvalidEvent("limit", f"must be 1 to {MAX_RESULTS}")
        bound = binding("across", tenant, agent, scope, query, since, until, group)
        asked = query_of(query)  # InvalidEvent('q') past MAX_QUERY_TERMS
        after, marks, documents = None, None, None
        if cursor:
            marks, after, documents = decode_cursor(self.cursors, cursor, bound)
        meaning = started(self.similar, tenant, query, agent=agent) if agent is not None and asked.terms else None
        found, cut = await self._candidates(tenant, agent, asked.lookup if asked.terms else [], limit)
        near = await nearest(meaning, found, self.meaning_min)  # by meaning too
        if marks is None:  # the first page: the run's snapshot, of the partitions both lists came from
            marks = await self._snapshot([*found, *(e for _, group in near or () for e in group)])
        if documents is None:
            documents = await self._documents(tenant, found)
        candidates = [e for e in found if visible(e, marks, scope, since, until)]
        seen = marks
        hits = await ranked(
            query,
            candidates,
            near,
            lambda e: visible(e, seen, scope, since, until),
            after=after,
            limit=limit + 1,
            documents=documents,
            group=group,
            key=across_key,
            ranker=self.ranker,
            floor=self.meaning_min,
        )
        more = len(hits) > limit
        hits = hits[:limit]
        nearby = await self._neighbours(hits, radius, marks, scope, agent, found) if radius else {}
        shown = [n for hit in hits for n in nearby.get((hit.entry.ref, hit.entry.seq), [])]
        at = iter(await off_loop(self.ranker, centres, query, [n.text for n in shown]) if shown else [])
        results = []
        for hit in hits:
            item = _brief(hit.entry, hit.found.at, marks)
            item["match"] = "phrase" if hit.found.phrase else "tokens"
            item["coverage"] = hit.found.coverage
            item["score"] = round(hit.found.score, 4)
            item["also"] = [{"entry_id": e.entry_id, "role": e.role, "seq": str(e.seq)} for e in hit.also]
            item["source_ref"] = {
                "entry_id": hit.entry.entry_id,
                "conversation": hit.entry.ref.conversation,
                "thread": item["thread"],
            }
            item["neighbours"] = [_brief(n, next(at), marks) for n in nearby.get((hit.entry.ref, hit.entry.seq), [])]
            results.append(item)
        return {
            "query": query,
            "scope": scope,
            "snapshot": {part: str(at) for part, at in sorted(marks.items())},
            "partial": cut or partial(found, self.candidates),
            "results": results,
            "next_cursor": encode_cursor(self.cursors, bound, marks, hits[-1].key, documents)
            if more and hits
            else None,
        }

    async def _candidates(
        self, tenant: str, agent: str | None, lookup: list[str], limit: int
    ) -> tuple[list[Entry], bool]:
        """The candidates, and whether a common term's were cut to those where it weighs most (a search
        reads postings: projections/postings.py); no word at all finds nothing, never the archive whole."""
        if not lookup:
            return [], False
        cap = self.candidates + 1
        return await self.search.bounded(tenant, lookup, agent=agent, per_term=per_term(limit), limit=cap)

    async def _documents(self, tenant: str, found: list[Entry]) -> int | None:
        """How many exchanges the tenant holds, for BM25's idf (as Conversations.documents counts a thread's)."""
        metas = await self.archive.conversations(tenant)
        if not metas or any(m.entries is None for m in metas):
            return None
        exchanges = len({(e.ref, e.exchange_id or e.entry_id) for e in found})
        per = len({(e.ref, e.entry_id) for e in found}) / exchanges if exchanges else 1.0
        return round(sum(m.entries or 0 for m in metas) / max(per, 1.0))

    async def _snapshot(self, found: list[Entry]) -> Marks:
        """Per partition a candidate came from, the highest offset applied there now."""
        marks = marks_of(found)
        if self.checkpoints is not None:
            checkpoints = self.checkpoints
            known = {part: where for part in marks if (where := topic_partition(part)) is not None}
            applied = await asyncio.gather(*(checkpoints.applied(*where) for where in known.values()))
            for part, at in zip(known, applied, strict=True):
                marks[part] = max(marks[part], at)
        return marks

    async def _neighbours(
        self, hits: list[Hit], radius: int, marks: Marks, scope: Scope, agent: str | None, found: list[Entry]
    ) -> dict[tuple[ConversationRef, int], list[Entry]]:
        """Entries either side of each hit in its conversation, in the run's snapshot and scope; for an
        agent, only those it took part in."""
        by_conversation: dict[ConversationRef, list[Entry]] = {}
        for hit in hits:
            by_conversation.setdefault(hit.entry.ref, []).append(hit.entry)
        refs = list(by_conversation)
        reads = await asyncio.gather(
            *(
                self.archive.neighbours(
                    ref,
                    [e.seq for e in by_conversation[ref]],
                    radius,
                    marks.get(partition_of(by_conversation[ref][0]), -1),
                    found,
                )
                for ref in refs
            )
        )
        nearby: dict[tuple[ConversationRef, int], list[Entry]] = {}
        for ref, read in zip(refs, reads, strict=True):
            for seq, near in read.items():
                nearby[(ref, seq)] = [
                    n for n in near if visible(n, marks, scope) and (agent is None or n.agent == agent)
                ]
        return nearby
