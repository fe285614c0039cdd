"""Archive search's ranking with or without vectors (MEMLOG_SEARCH_VECTORS): the word ranking alone, or
fused with the scope's nearest exchanges by meaning (projections/hybrid.py). Shared by a thread's
search (memlog/app/conversations.py) and the search across threads (memlog/app/search.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from memlog.app.ranker import Ranker, off_loop
from projections.archives import Entry, Key, Match, rank_key
from projections.hybrid import NEAREST_READ, SimilarEntries, fuse
from projections.ranking import Grouping, Hit, rank

Near = list[tuple[float, list[Entry]]]


def started(
    similar: SimilarEntries | None,
    tenant: str,
    query: str,
    *,
    thread: tuple[str, str] | None = None,
    agent: str | None = None,
) -> asyncio.Future[Near] | None:
    """The scope's nearest groups, read while the words' candidates are (None when search has no
    vectors): the question's vector and the scope's vectors cost more than the candidates' read, and
    would otherwise follow it."""
    if similar is None:
        return None
    pending = asyncio.ensure_future(similar.nearest(tenant, query, thread=thread, agent=agent, limit=NEAREST_READ))
    pending.add_done_callback(_retrieved)
    return pending


def _retrieved(pending: asyncio.Future[Near]) -> None:
    """A read nobody awaits (the words found nothing, or the search failed first) raises nowhere."""
    if not pending.cancelled():
        pending.exception()


async def nearest(pending: asyncio.Future[Near] | None, found: Sequence[Entry], floor: float | None) -> Near | None:
    """The nearest groups (None: no vectors); none when the words found no candidate and the nearest
    may not answer alone (`floor` None: the read is stopped)."""
    if pending is None:
        return None
    if not found and floor is None:
        pending.cancel()
        await asyncio.wait([pending])
        return []
    return await pending


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
    floor: float | None = None,
) -> list[Hit]:
    """The page after `after`: the word ranking's (`near` None: no vectors), or the fused one, of the
    nearest groups `visible` in the run's snapshot, scope and dates (alone, with no word candidate, when
    the nearest one's cosine exceeds `floor`: projections/hybrid.py). Off the event loop and its lock
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
    return fuse(lexical, kept, key=key, group=group, after=after, limit=limit, floor=floor)
