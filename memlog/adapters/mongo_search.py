"""Search across threads over the archived entries in MongoDB (any server speaking its wire protocol).

The entries are in memlog/adapters/mongo_archives.py's `entry_groups` collection (memlog/adapters/mongo_entries.py);
this store adds the multikey index a search across threads narrows its candidates with, on the token
index `terms` (of every entry of a group) behind equality on who may see the entries: `by_agent_term`
(tenant, agent, terms). An operator's search (operator-only, rare)
gives MongoDB bounds on its tenant and terms; SecantusDB's planner scans the collection for it.
The pure matcher decides (projections/search.py).
"""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase

from memlog.adapters.mongo_bounded import bounded_groups
from memlog.adapters.mongo_entries import GROUPS, WITHOUT_ORIGINALS, entries_of, entry_of_doc
from memlog.adapters.mongo_postings import MongoPostings
from memlog.adapters.mongo_siblings import with_siblings
from memlog.adapters.mongo_store import mongo_errors
from projections.archives import Entry

# what a candidate needs: neither the token index nor the original (an original can be megabytes)
CANDIDATE_FIELDS = WITHOUT_ORIGINALS


class MongoArchiveSearch:
    """See projections/ports.py ArchiveSearch for the contract."""

    def __init__(self, database: AsyncDatabase[dict[str, Any]], *, search_time_ms: int = 1000) -> None:
        """search_time_ms: maxTimeMS of a search's reads (MEMLOG_SEARCH_MAX_TIME_MS)."""
        self._entries = database[GROUPS]
        self._postings = MongoPostings(database)
        self._search_time_ms = search_time_ms

    async def prepare(self) -> None:
        with mongo_errors():
            # One multikey index for both searches: an agent's reads it by tenant, agent and term; an
            # operator's (rare, operator-only) by its tenant prefix. A second index for the operator
            # made every archived entry cost SecantusDB 2.7x the writes with the per-thread one (929 vs
            # 341 entries/s with 40 terms each, three multikey indexes against one).
            await self._entries.create_index(
                [("tenant", ASCENDING), ("agent", ASCENDING), ("terms", ASCENDING)], name="by_agent_term"
            )
            await self._postings.prepare()

    @staticmethod
    def across_query(tenant: str, terms: list[str], *, agent: str | None) -> dict[str, Any]:
        """The MongoDB filter the search issues (the benchmark times it raw): equality, then the terms,
        as the index reads them; no range (SecantusDB's planner would scan the collection)."""
        query: dict[str, Any] = {"tenant": tenant}
        if agent is not None:
            query["agent"] = agent
        if terms:
            query["terms"] = {"$in": terms}
        return query

    async def across(
        self, tenant: str, terms: list[str], *, agent: str | None, limit: int | None = None
    ) -> list[Entry]:
        found = self._entries.find(self.across_query(tenant, terms, agent=agent), CANDIDATE_FIELDS)
        found = found.max_time_ms(self._search_time_ms)
        with mongo_errors():
            groups = await (found if limit is None else found.limit(limit)).to_list()
            entries = [entry_of_doc(d) for d in entries_of(groups)]
            # whole exchanges: ranked as one document
            return await with_siblings(self._entries, entries, CANDIDATE_FIELDS, self._search_time_ms)

    async def bounded(
        self, tenant: str, terms: list[str], *, agent: str | None, per_term: int, limit: int | None = None
    ) -> tuple[list[Entry], bool]:
        """A term's postings first (small documents, best first): more than `per_term` of them, and only
        the groups of its best `per_term` are read; fewer, and the term finds its groups as `across` does,
        a few terms a command (memlog/adapters/mongo_bounded.py). An operator's (agent None) finds every
        term's groups by its postings: `across` scans the collection for it (SecantusDB), so only a term
        no posting names (an archive written before postings) goes through it."""
        with mongo_errors():
            tops = {t: await self._postings.top(tenant, agent, t, per_term + 1, self._search_time_ms) for t in terms}
            groups, cut = await bounded_groups(
                self._entries,
                tops,
                lambda run: self.across_query(tenant, run, agent=agent),
                lambda doc: doc.get("tenant") == tenant and agent in (None, doc.get("agent")),
                per_term=per_term,
                indexed=agent is not None,
                projection=CANDIDATE_FIELDS,
                time_ms=self._search_time_ms,
                limit=limit,
            )
            entries = [entry_of_doc(d) for d in entries_of(groups)]
            found_all = await with_siblings(self._entries, entries, CANDIDATE_FIELDS, self._search_time_ms)
        return found_all, cut
