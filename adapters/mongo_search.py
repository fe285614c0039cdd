"""Search across threads over the archived entries in MongoDB (any server speaking its wire protocol).

The entries are adapters/mongo_archives.py's `entries` collection; this store adds the multikey index
a search across threads narrows its candidates with, on the token index `terms` behind equality on who
may see the entry: `by_agent_term` (tenant, agent, terms). An operator's search (operator-only, rare)
gives MongoDB bounds on its tenant and terms; SecantusDB's planner scans the collection for it.
The pure matcher decides (projections/search.py).
"""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase

from adapters.mongo_entries import entry_of_doc
from adapters.mongo_store import mongo_errors
from projections.archives import Entry

# what a candidate needs: neither the token index nor the original (an original can be megabytes)
CANDIDATE_FIELDS = {"terms": 0, "original": 0}


class MongoArchiveSearch:
    """See projections/ports.py ArchiveSearch for the contract."""

    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._entries = database["entries"]

    async def prepare(self) -> None:
        with mongo_errors():
            # One multikey index for both searches: an agent's reads it by tenant, agent and term; an
            # operator's (rare, operator-only) by its tenant prefix. A second index for the operator
            # made every archived entry cost SecantusDB 2.7x the writes with the per-thread one (929 vs
            # 341 entries/s with 40 terms each, three multikey indexes against one).
            await self._entries.create_index(
                [("tenant", ASCENDING), ("agent", ASCENDING), ("terms", ASCENDING)], name="by_agent_term"
            )
            existing = {index["name"] for index in await (await self._entries.list_indexes()).to_list()}
            for old in ("by_tenant_term",) if existing else ():
                if old in existing:
                    await self._entries.drop_index(old)  # an operator's search uses by_agent_term's prefix

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

    async def across(self, tenant: str, terms: list[str], *, agent: str | None) -> list[Entry]:
        with mongo_errors():
            docs = await self._entries.find(self.across_query(tenant, terms, agent=agent), CANDIDATE_FIELDS).to_list()
        return [entry_of_doc(d) for d in docs]
