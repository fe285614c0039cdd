"""Archive search's nearest exchanges by vector (MEMLOG_SEARCH_VECTORS) over the groups in MongoDB.

The runs' vectors are in `vector_blocks` (memlog/adapters/mongo_vector_blocks.py: packed by block, a
few small documents a thread), read without the groups, compared with the question's here, and the
nearest groups read whole. One search reads at most `scan` vectors (MEMLOG_SEARCH_MAX_CANDIDATES), the
first blocks the server returns (unsorted: a sort would read them all); a scope holding more (an
agent's long history) has its other groups found by words alone, never by meaning. Mixed into
MongoConversationArchive; see projections/ports.py SimilarEntries for the contract.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import ExecutionTimeout

from memlog.adapters.archive_vectors import ArchiveVectors, similarities
from memlog.adapters.mongo_entries import WITHOUT_ORIGINALS, entries_of, entry_of_doc
from memlog.adapters.mongo_store import mongo_errors
from memlog.adapters.mongo_vector_blocks import MongoVectorBlocks
from projections.archives import Entry

log = logging.getLogger(__name__)


class ArchiveNearest:
    """Mixed into MongoConversationArchive."""

    _entries: AsyncCollection[dict[str, Any]]
    _vector_blocks: MongoVectorBlocks
    _vectors: ArchiveVectors | None
    _search_time_ms: int

    async def nearest(
        self, tenant: str, question: str, *, thread: tuple[str, str] | None, agent: str | None, limit: int
    ) -> list[tuple[float, list[Entry]]]:
        if self._vectors is None:
            return []
        scope: dict[str, Any] = {"tenant": tenant}
        if thread is not None:
            scope |= {"thread": thread[0], "owner": thread[1]}
        if agent is not None:
            scope["agent"] = agent
        vectors = self._vector_blocks.read(scope, self._vectors.scan, self._search_time_ms)
        with mongo_errors():  # the question's vector computed while the scope's are read
            try:
                vector, blobs = await asyncio.gather(self._vectors.question(question), vectors)
            except ExecutionTimeout:  # meaning is an addition: past the time limit, the words alone answer
                log.warning("search: the scope's vectors took over %d ms; ranked by words alone", self._search_time_ms)
                return []
        best: dict[Any, float] = {}
        scores = await asyncio.to_thread(similarities, vector, [blob for _, blob in blobs])
        for (group, _), score in zip(blobs, scores, strict=True):
            best[group] = max(score, best.get(group, -1.0))
        top = sorted(best, key=lambda group: (-best[group], str(group)))[:limit]
        if not top:
            return []
        with mongo_errors():
            groups = await self._entries.find({"_id": {"$in": top}}, WITHOUT_ORIGINALS).to_list()
        by_group: dict[Any, list[Entry]] = {}
        for doc in entries_of(groups):
            by_group.setdefault(doc["group"], []).append(entry_of_doc(doc))
        return [(best[group], by_group[group]) for group in top if group in by_group]
