"""Shared-thread summaries kept per asker (DESIGN "Shared-thread summaries"): who gets which part when
the public thread or an automation thread folds. Pure: no I/O.

Each asker's lines fold into their own part of the summary, which travels sealed under their key;
erasing them takes that part away, and no replay can bring it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from projections.session import Exchange, SessionHead

# A shared thread's summary keeps the parts of its newest askers: past this many, the oldest part is
# dropped (its lines stay folded away), so each part keeps at least summary_chars / 12 characters.
MAX_SEGMENTS = 12


@dataclass(frozen=True)
class SegmentPlan:
    """What one asker's part of a shared thread's summary becomes in a fold."""

    asker: str | None
    folded: tuple[Exchange, ...]  # their lines this fold takes out, oldest first
    previous: str  # their part so far
    budget: int  # characters their new part may hold; 0: it is dropped


def plan_segments(
    head: SessionHead, folded: Sequence[Exchange], summary_chars: int, max_segments: int = MAX_SEGMENTS
) -> list[SegmentPlan]:
    """The parts a fold of a shared thread writes, one per asker whose part changes, by asker.

    Each asker's lines fold into their own part, never into another's; the parts share the summary's
    characters evenly, so a part longer than its share is shortened, and past `max_segments` the
    parts of those who asked least recently are dropped.
    """
    lines: dict[str | None, list[Exchange]] = {}
    for exchange in folded:
        lines.setdefault(exchange.subject, []).append(exchange)
    previous = {segment.asker: segment for segment in head.segments}
    recency = {segment.asker: (0, segment.at) for segment in head.segments}
    for asker, held in lines.items():
        recency[asker] = (1, max(exchange.occurred_at for exchange in held))  # folding now: the newest
    newest_first = sorted(recency, key=lambda asker: (*recency[asker], asker or ""), reverse=True)
    kept = set(newest_first[:max_segments])
    budget = summary_chars // max(1, len(kept))
    plans: list[SegmentPlan] = []
    for asker in sorted(recency, key=lambda asker: (asker is not None, asker or "")):
        theirs = tuple(lines.get(asker, ()))
        before = previous[asker].text if asker in previous else ""
        if asker not in kept:
            plans.append(SegmentPlan(asker, theirs, before, 0))
        elif theirs or len(before) > budget:
            plans.append(SegmentPlan(asker, theirs, before, budget))
    return plans
