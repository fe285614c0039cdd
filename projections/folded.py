"""Loss notices: what a summary folded away, and where the exact words still are (seed 004,
"Compression and prompt context": summaries are lossy recaps that say so and point the agent to
session search for exact history).

A fold records what it folded (`Folded`) beside the summary it writes: the session's head holds one,
each asker's part of a shared thread's summary its own (so erasing an asker takes their part of the
notice too, live and in a replay). The notice is derived from them when the context is rendered; it
belongs to the summary, which a fold rewrites anyway, so the rendered context still only grows at
its end between folds. Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from projections.archives import thread_ref


@dataclass(frozen=True)
class Folded:
    """What the folds behind one summary (or one asker's part) have folded away so far."""

    summarizer: str  # the one that wrote the summary as it stands: each fold rewrites it whole
    exchanges: int
    tokens: int  # the folded exchanges' tokens (tiktoken), as the thread counted them
    since: int | None  # earliest folded exchange (epoch ms); None: an older summary predates the record
    until: int | None  # latest folded exchange (epoch ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "summarizer": self.summarizer,
            "exchanges": self.exchanges,
            "tokens": self.tokens,
            "since": self.since,
            "until": self.until,
        }

    @classmethod
    def from_json(cls, raw: Any) -> Folded | None:
        """A stored record, or None for anything else (a session stored before notices existed)."""
        if not isinstance(raw, dict):
            return None
        since, until = raw.get("since"), raw.get("until")
        return cls(
            summarizer=str(raw.get("summarizer", "")),
            exchanges=int(raw.get("exchanges", 0)),
            tokens=int(raw.get("tokens", 0)),
            since=None if since is None else int(since),
            until=None if until is None else int(until),
        )


def fold_more(previous: Folded | None, had_summary: bool, summarizer: str, folded: Sequence[tuple[int, int]]) -> Folded:
    """The record once a fold by `summarizer` has folded `folded` ((occurred_at, tokens) per exchange)
    into a summary that carried `previous` forward. A summary held before records existed
    (`had_summary` without `previous`) leaves the beginning unknown: `since` None, counts "at least"."""
    times = [at for at, _ in folded]
    if previous is None:
        previous = Folded(summarizer, 0, 0, None if had_summary else min(times, default=None), None)
    since = previous.since
    if since is not None and times:
        since = min(since, *times)
    until = max([*times, previous.until] if previous.until is not None else times, default=None)
    return Folded(
        summarizer=summarizer,
        exchanges=previous.exchanges + len(folded),
        tokens=previous.tokens + sum(tokens for _, tokens in folded),
        since=since,
        until=until,
    )


@dataclass(frozen=True)
class SummaryNotice:
    """The loss notice of a thread's summary: shown once, at the summary, and as a structured field."""

    summarizer: str
    folded_exchanges: int
    folded_tokens: int
    search: str  # the thread's own search route, `q=` last: append the URL-encoded words
    since: int | None
    until: int | None
    complete: bool  # False: an older summary predates the record, so the counts are a lower bound
    lossy: bool = True  # every fold is: a summary keeps at most MEMLOG_SUMMARY_CHARS of what it folds

    def view(self) -> dict[str, Any]:
        return {
            "lossy": self.lossy,
            "summarizer": self.summarizer,
            "folded_exchanges": self.folded_exchanges,
            "folded_tokens": self.folded_tokens,
            "complete": self.complete,
            "search": self.search,
            "since": self.since,
            "until": self.until,
        }

    def render(self) -> str:
        """One line, read by the model before the summary."""
        kind = "extractive" if self.summarizer == "extractive" else f"model ({self.summarizer})"
        count = f"{self.folded_exchanges} earlier exchange" + "s" * (self.folded_exchanges != 1)
        tokens = f"about {self.folded_tokens} tokens"
        if not self.complete:
            count, tokens = f"at least {count}", f"{tokens} or more"
        span = ""
        if self.since is not None and self.until is not None:
            span = f" from {_when(self.since)} to {_when(self.until)}"
        elif self.until is not None:
            span = f" until {_when(self.until)}"
        return (
            f"[Lossy {kind} summary: {count} ({tokens}){span} were folded into it, and older prose may be "
            f"omitted. For their exact words, search this thread: GET {self.search}<words>]"
        )


def _when(at: int) -> str:
    return dt.datetime.fromtimestamp(at / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def search_route(tenant: str, thread: str, owner: str) -> str:
    """The thread's search route (memlog/api/routers/conversations.py), names URL-encoded."""
    ref = quote(thread_ref(thread, owner), safe=":")
    return f"/v1/tenants/{quote(tenant, safe='')}/threads/{ref}/search?q="


def summary_notice(tenant: str, thread: str, owner: str, parts: Iterable[Folded | None]) -> SummaryNotice | None:
    """The notice over a summary's parts (the session's one; a shared thread's older summary and its
    askers' parts, oldest first). None when no part has a record: a summary stored before notices
    existed renders exactly as it did."""
    held = list(parts)
    records = [part for part in held if part is not None]
    if not records:
        return None
    complete = len(records) == len(held) and all(part.since is not None for part in records)
    starts = [part.since for part in records if part.since is not None]
    ends = [part.until for part in records if part.until is not None]
    return SummaryNotice(
        summarizer=records[-1].summarizer,  # the newest part's: parts come oldest first
        folded_exchanges=sum(part.exchanges for part in records),
        folded_tokens=sum(part.tokens for part in records),
        search=search_route(tenant, thread, owner),
        since=min(starts) if complete and starts else None,
        until=max(ends, default=None),
        complete=complete,
    )
