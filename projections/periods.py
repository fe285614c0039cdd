"""Period keys, the pure part: the log forgets on schedule (issue 36).

A subject's thread and trace events are sealed under a data key of the period their time falls in
(a calendar month in UTC by default, or fixed periods of `MEMLOG_LOG_KEY_PERIOD_SECONDS`), never of
the subject's standing key. The period is part of the key id carried in the sealed field
(`<random hex>.<label>`), so opening picks the period's key, and a key id without a label is a
standing key (every record sealed before period keys, and facts). Once the longest lifetime that
needs a period's records has passed since its end (`longest_need_ms`, the one place it is derived),
the worker deletes the period's keys: its records stay on Kafka, untouched and unreadable.

Labels: `m<year>-<month>` for calendar months, `s<seconds>-<index>` for fixed periods (the index
counts periods since the epoch); each names its own start and end, so no setting is needed to read one.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import uuid
from dataclasses import dataclass

# The events a period key seals: whatever they feed (sessions, conversations of the archive, traces,
# receipts) lives for a bounded time counted from the event. A receipt lives MEMLOG_TRACE_DAYS from
# itself, in the receipts store and in its thread's served mark (the session's TTL), both within the
# keep. Facts are not among them: a fact lives from the subject's last question, not from its own
# record, so its events keep the subject's standing key.
PERIOD_SEALED = frozenset(
    {
        "memlog.QuestionAsked",
        "memlog.ToolCalled",
        "memlog.AnswerGiven",
        "memlog.ThreadFolded",
        "memlog.RunTraced",
        "memlog.ReceiptRecorded",
    }
)

_MONTH = re.compile(r"m(\d{4})-(\d{2})")
_FIXED = re.compile(r"s([1-9]\d*)-(\d+)")


@dataclass(frozen=True)
class KeyPeriods:
    """How the log's time is cut into key periods: `seconds` long, or calendar months (UTC) with 0."""

    seconds: int = 0

    def label(self, at_ms: int) -> str:
        """The period holding the instant `at_ms` (epoch milliseconds; before 1970 reads as 1970)."""
        at_ms = max(at_ms, 0)
        if self.seconds > 0:
            return f"s{self.seconds}-{at_ms // (self.seconds * 1000)}"
        return _month_of_day(at_ms // DAY_MS)


DAY_MS = 86_400_000


@functools.lru_cache(maxsize=1024)
def _month_of_day(day: int) -> str:
    """The calendar month (UTC) of the `day`-th day since the epoch (every event seals with its month's key:
    worked out once a day, not once an event)."""
    start = dt.datetime.fromtimestamp(day * DAY_MS / 1000, dt.UTC)
    return f"m{start.year:04d}-{start.month:02d}"


@functools.lru_cache(maxsize=1024)
def period_range(label: str) -> tuple[int, int]:
    """[start, end) of a period in epoch milliseconds; ValueError for what is not a label."""
    if (fixed := _FIXED.fullmatch(label)) is not None:
        length, index = int(fixed[1]) * 1000, int(fixed[2])
        return index * length, (index + 1) * length
    if (month := _MONTH.fullmatch(label)) is not None and 1 <= int(month[2]) <= 12:
        year, number = int(month[1]), int(month[2])
        start = dt.datetime(year, number, 1, tzinfo=dt.UTC)
        end = dt.datetime(year + number // 12, number % 12 + 1, 1, tzinfo=dt.UTC)
        return int(start.timestamp() * 1000), int(end.timestamp() * 1000)
    raise ValueError(f"{label!r} is not a key period")


def period_key_id(label: str) -> str:
    """A new key id of a period's key: it names the period, so an opener knows which key it needs."""
    period_range(label)
    return f"{uuid.uuid4().hex}.{label}"


def period_of(key_id: str) -> str | None:
    """The period a key id names; None for a standing key (no period)."""
    _, dot, label = key_id.partition(".")
    if not dot:
        return None
    try:
        period_range(label)
    except ValueError:
        return None
    return label


def period_ref(ref: str, label: str) -> str:
    """A period key's name in the vault. A subject's standing key is named by its `subject_ref`, which
    starts with a digit; this one starts with 'p' and ends the label at the first ':', so no two
    (subject, period) pairs, and no standing key, share a name."""
    return f"p{label}:{ref}"


def longest_need_ms(
    session_ttls_ms: tuple[int, ...], trace_keep_ms: int, conversation_keep_ms: int | None
) -> int | None:
    """How long after a period's end its records may still be needed: the longest lifetime of what the
    period-sealed events feed (sessions and shared threads, traces, the archive's conversations under
    retention). None: some of it lives until purged (conversations while retention is disabled), so no
    period key is shredded. A thread or conversation still in use past that keeps its older records in
    its live projection; a replay rebuilds it from the periods still readable and counts the rest."""
    if conversation_keep_ms is None:
        return None
    return max((*session_ttls_ms, trace_keep_ms, conversation_keep_ms))


def due(label: str, keep_ms: int | None, now_ms: int) -> bool:
    """Whether a period's key may be shredded: `keep_ms` has passed since the period ended."""
    return keep_ms is not None and period_range(label)[1] + keep_ms <= now_ms


def shred_cutoff_ms(keep_ms: int | None, now_ms: int) -> int | None:
    """Period keys whose period ended at or before this instant are due; None: none ever is."""
    return None if keep_ms is None else now_ms - keep_ms
