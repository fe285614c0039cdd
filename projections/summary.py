"""The extractive summary: deterministic, no network, and it carries the previous summary forward."""

from __future__ import annotations

from collections.abc import Sequence

from projections.session import Exchange

ELLIPSIS = "…"
# The previous summary keeps at least this share of the cap, so what an early fold kept survives
# later folds; the rest is shared evenly by the newly folded exchanges.
PREVIOUS_SHARE = 0.6


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + ELLIPSIS if limit > 0 else ""


def _line(exchange: Exchange) -> str:
    answer = exchange.answer or ""
    if exchange.channel == "askx":
        return f"askx {exchange.question} -> {answer}"
    return f"{exchange.question} -> {answer}"


def extractive_summary(previous: str, folded: Sequence[Exchange], limit: int) -> str:
    """One line per folded exchange (what was asked and answered) under the previous summary, within `limit`."""
    if not folded:
        return _clip(previous, limit)
    room_for_previous = limit if not previous else max(int(limit * PREVIOUS_SHARE), limit - 80 * len(folded))
    kept = previous[:room_for_previous]
    if len(previous) > room_for_previous:
        # drop the newest part of the old summary rather than its oldest facts
        kept = kept[: kept.rfind("\n") + 1] if "\n" in kept else kept
    kept = kept.rstrip("\n")
    room = limit - len(kept) - (1 if kept else 0)
    share = room // len(folded) - 3  # "- " and the newline
    lines = [f"- {_clip(_line(exchange), share)}" for exchange in folded if share > 8]
    summary = "\n".join([kept, *lines] if kept else lines)
    return summary[:limit]
