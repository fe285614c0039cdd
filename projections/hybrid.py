"""Archive search with vectors (MEMLOG_SEARCH_VECTORS, issue 35): the word ranking and the nearest
exchanges by meaning, fused by reciprocal rank (Cormack, Clarke and Buettcher, 2009). Pure rules.

The word ranking is projections/ranking.py's, whole (every match scored, phrases first); the vector
side is the scope's NEAREST exchanges in the run's snapshot and scope, nearest first. An exchange's
fused score is the sum over the two lists of 1 / (RRF_K + its rank there), and its key sorts phrase
matches first, then the fused score, then newer, then identity: the same shape as the word ranking's,
so cursors page it the same way (deterministic for one snapshot and one question).

A query whose content words occur nowhere in the scope: some exchange is always nearest something, so
the nearest answer alone only when the nearest one's cosine exceeds a floor (MEMLOG_SEARCH_MEANING_MIN,
fitted on questions about things never discussed: bench/search_eval_threshold.py); otherwise, as with
no floor, nothing found by words is nothing found. When the words found something, the vectors re-rank
and add to it, whatever their cosine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from projections.archives import ConversationRef, Entry, Key, Match
from projections.ranking import Grouping, Hit, unit_of

RRF_K = 60  # the usual constant: a rank's weight falls slowly past the first few
NEAREST = 10  # the vector side's list: the scope's ten nearest exchanges (what the evaluation fused)
NEAREST_READ = 40  # groups read nearest, room for those the snapshot, scope or dates leave out
Unit = tuple[ConversationRef, str, str]  # an exchange, or an entry (projections/ranking.py unit_of)


class SimilarEntries(Protocol):
    """Archive search's vectors (MEMLOG_SEARCH_VECTORS): the exchanges nearest a question in meaning."""

    async def nearest(
        self, tenant: str, question: str, *, thread: tuple[str, str] | None, agent: str | None, limit: int
    ) -> list[tuple[float, list[Entry]]]:
        """The `limit` groups of the scope (a thread: its kind and owner, every conversation and scope;
        an agent's: the entries of events by `agent`) whose vectors are nearest the question's, nearest
        first, each with its cosine and its entries. Groups archived without a vector are not among
        them; none when the scope's vectors take longer than the search's time limit to read (the
        words alone answer). The caller applies snapshot, scope and dates."""
        ...


def meant(near: Sequence[tuple[float, list[Entry]]], floor: float | None) -> bool:
    """Whether the nearest groups answer a question whose words found nothing: the first one's cosine
    exceeds the floor (the question is about something the scope discussed, not merely nearest)."""
    return floor is not None and bool(near) and near[0][0] > floor


def _shown(entries: Sequence[Entry]) -> Entry:
    """A vector-only hit's entry: the exchange's answer, else its first entry."""
    return next((e for e in entries if e.role == "answer"), entries[0])


def fuse(
    lexical: Sequence[Hit],
    near: Sequence[tuple[float, list[Entry]]],
    *,
    key: Callable[[Match, Entry], Key],
    group: Grouping = "exchange",
    after: Key | None = None,
    limit: int,
    floor: float | None = None,
) -> list[Hit]:
    """The page after `after` of the fused ranking. `lexical`: every word hit in rank order; `near`:
    groups in the run's snapshot and scope, nearest first, with their cosine. With no word hit, the
    nearest alone when the first one's cosine exceeds `floor` (None: never)."""
    if not lexical and not meant(near, floor):
        return []
    score: dict[Unit, float] = {}
    for at, hit in enumerate(lexical):
        score[unit_of(hit.entry, group)] = 1.0 / (RRF_K + at + 1)
    nearest: dict[Unit, list[Entry]] = {}
    for _, entries in near:
        if not entries:
            continue
        unit = unit_of(entries[0], group)
        if unit in nearest:
            nearest[unit].extend(entries)
        elif len(nearest) < NEAREST:
            nearest[unit] = list(entries)
    for at, unit in enumerate(nearest):
        score[unit] = score.get(unit, 0.0) + 1.0 / (RRF_K + at + 1)
    hits = []
    for hit in lexical:
        unit = unit_of(hit.entry, group)
        found = Match(hit.found.phrase, hit.found.coverage, hit.found.at, score[unit])
        hits.append(Hit(hit.entry, found, key(found, hit.entry), hit.also))
        nearest.pop(unit, None)
    for unit, entries in nearest.items():
        entry = _shown(sorted(entries, key=lambda e: e.seq))
        found = Match(False, 0, 0, score[unit])
        hits.append(Hit(entry, found, key(found, entry)))
    ordered = sorted(hits, key=lambda hit: hit.key)
    if after is not None:
        ordered = [hit for hit in ordered if hit.key > after]
    return ordered[:limit]
