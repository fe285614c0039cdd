"""Archive search's ranking with or without vectors (MEMLOG_SEARCH_VECTORS): the word ranking alone, or
fused with the scope's nearest exchanges by meaning (projections/hybrid.py). Shared by a thread's
search (memlog/app/conversations.py) and the search across threads (memlog/app/search.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memlog.app.ranker import Ranker, off_loop
from projections.archives import Entry, Key, Match, rank_key
from projections.hybrid import NEAREST_READ, SimilarEntries, fuse
from projections.ranking import Grouping, Hit, rank

Near = list[tuple[float, list[Entry]]]


async def nearest(
    similar: SimilarEntries | None,
    tenant: str,
    query: str,
    found: Sequence[Entry],
    *,
    thread: tuple[str, str] | None = None,
    agent: str | None = None,
) -> Near | None:
    """The scope's nearest groups when search has vectors (None when it has none); none when the words
    found no candidate (nothing to fuse, and no question vector to pay for)."""
    if similar is None:
        return None
    if not found:
        return []
    return await similar.nearest(tenant, query, thread=thread, agent=agent, limit=NEAREST_READ)


async def ranked(
    query: str,
    candidates: list[Entry],
    near: Near | None,
    visible: Callable[[Entry], bool],
    *,
    after: Key | None,
    limit: int,
    documents: int | None,
    group: Grouping,
    key: Callable[[Match, Entry], Key] = rank_key,
    ranker: Ranker | None = None,
) -> list[Hit]:
    """The page after `after`: the word ranking's (`near` None: no vectors), or the fused one, of the
    nearest groups `visible` in the run's snapshot, scope and dates. Off the event loop and its lock
    (memlog/app/ranker.py): scoring a thousand long exchanges takes a while, and /healthz must answer
    meanwhile."""
    if near is None:
        return await off_loop(
            ranker, rank, query, candidates, after=after, limit=limit, key=key, documents=documents, group=group
        )
    lexical = await off_loop(
        ranker,
        rank,
        query,
        candidates,
        after=None,
        limit=len(candidates) + 1,
        key=key,
        documents=documents,
        group=group,
    )
    kept = [(score, shown) for score, entries in near if (shown := [e for e in entries if visible(e)])]
    return fuse(lexical, kept, key=key, group=group, after=after, limit=limit)
