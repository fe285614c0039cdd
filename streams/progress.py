"""How far each projection is behind the log, and how long it has gone without moving.

A lag alone is not a fault: a busy worker is behind for a while. A lag that does not shrink is
(DESIGN, "Each projection resumes where it stopped"): the worker's watchdog and the API's readiness
both ask this clock which projections have held a lag without applying anything for too long.
The clock only compares what it is shown; reading the log and the checkpoints is the caller's job.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    """One projection on one partition: its checkpoint, and how many records of the log lie beyond it."""

    projection: str
    topic: str  # short name: threads, facts, traces, privacy
    partition: int
    applied: int  # the newest offset applied, -1 when none
    lag: int

    @classmethod
    def at(cls, projection: str, topic: str, partition: int, applied: int, end: int) -> Reading:
        """From the log's end offset (the offset the next record will get)."""
        return cls(projection, topic, partition, applied, max(0, end - 1 - applied))

    @property
    def name(self) -> str:
        return f"{self.projection}/{self.topic}.{self.partition}"


@dataclass(frozen=True)
class Behind:
    """A reading with lag, and how long its projection has applied nothing on that partition."""

    reading: Reading
    idle_seconds: float

    def describe(self) -> str:
        return f"{self.reading.name} lag {self.reading.lag}, idle {self.idle_seconds:.0f}s"


class ProgressClock:
    """Remembers, per projection and partition, the checkpoint last seen and since when it has lagged unmoved.

    The clock starts at the first reading with lag, and starts again whenever the checkpoint moves;
    so a stall is never seen early, only up to one round late. A partition absent from a round of
    readings (revoked, or unread because a service is away) is forgotten, so it starts afresh.
    """

    def __init__(self) -> None:
        self._since: dict[tuple[str, str, int], tuple[int, float]] = {}  # with lag: checkpoint, since when

    def observe(self, readings: Iterable[Reading], now: float) -> list[Behind]:
        """Record one round of readings taken at `now`; every one with lag, with its idle time."""
        seen: dict[tuple[str, str, int], tuple[int, float]] = {}
        behind: list[Behind] = []
        for reading in readings:
            if reading.lag == 0:
                continue
            key = (reading.projection, reading.topic, reading.partition)
            previous = self._since.get(key)
            since = previous[1] if previous is not None and previous[0] == reading.applied else now
            seen[key] = (reading.applied, since)
            behind.append(Behind(reading, now - since))
        self._since = seen
        return behind

    def forget(self) -> None:
        """Start every clock afresh (after an outage: not moving while a service was away is no stall)."""
        self._since.clear()


def stalled(behind: Iterable[Behind], seconds: float, working: Collection[str] = ()) -> list[Behind]:
    """The readings that have held a lag without progress for `seconds` or more, but those of the
    projections `working`: a batch in progress counts as progress (see `working`)."""
    return [b for b in behind if b.idle_seconds >= seconds and b.reading.projection not in working]


def working(started: Mapping[str, float | None], now: float, batch_seconds: float) -> set[str]:
    """The projections inside a batch begun less than `batch_seconds` ago (`started`: when each one's
    batch in progress began, None between batches). A long batch (one costly record: a streamed tool
    call of 28,000 words) is work, not a stall, up to the bound; a batch that outlasts it is stuck."""
    return {name for name, since in started.items() if since is not None and now - since < batch_seconds}
