"""Search across threads over the archived entries in MongoDB (any server speaking its wire protocol).

The entries are adapters/mongo_archives.py's `entries` collection; this store adds the two multikey
indexes a search across threads narrows its candidates with, each on the token index `terms` behind
equality on who may see the entry: `by_agent_term` (tenant, agent, terms) for an agent's search,
`by_tenant_term` (tenant, terms) for an operator's. The pure matcher decides (projections/search.py).
"""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase

from adapters.mongo_archives import entry_of_doc
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
            await self._entries.create_index(
                [("tenant", ASCENDING), ("agent", ASCENDING), ("terms", ASCENDING)], name="by_agent_term"
            )
            await self._entries.create_index([("tenant", ASCENDING), ("terms", ASCENDING)], name="by_tenant_term")

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
