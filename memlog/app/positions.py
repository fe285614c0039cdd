"""Read your writes: wait until the projections a read draws on have applied a position; their lag."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from memlog.config.settings import Settings
from projections.engines import CheckpointSignals
from projections.ports import Checkpoints
from projections.position import Position
from projections.stores import Stores
from schemas.errors import InvalidEvent, LogUnavailable, NotCaughtUp
from streams.positions import LogPositions

LAGGING_TOPICS = ("threads", "facts", "traces", "privacy")
# A read-your-writes wait (a route's `after`), handed to a use case, which runs it once it has checked the
# request's names: a bad name answers at once and waits for nothing.
Ready = Callable[[], Awaitable[None]]


async def at_once() -> None:
    """The wait of a request that names no position: none."""


# with signals, a waiter still looks this often: the facts, traces and privacy checkpoints (MongoDB) send none
SIGNALLED_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Lag:
    projection: str
    topic: str  # the short name: threads, facts, traces, privacy
    partition: int
    records: int  # written to the partition, not yet applied by the projection
    applied: int  # the projection's checkpoint: the newest offset it applied, -1 when none

    @property
    def name(self) -> str:
        return f"{self.projection}/{self.topic}.{self.partition}"


@dataclass(frozen=True)
class LagReport:
    lags: tuple[Lag, ...]
    dead_letters: dict[str, int]

    def caught_up(self, tolerance: int) -> bool:
        return all(lag.records <= tolerance for lag in self.lags)

    def view(self) -> dict[str, Any]:
        return {"lag": {lag.name: lag.records for lag in self.lags}, "dead_letters": self.dead_letters}


class Positions:
    """Args:
    settings: MEMLOG_READ_WAIT_SECONDS bounds a read's wait; the partition count bounds a position.
    stores: the current namespace's stores (reads follow the namespace pointer, so asked each time).
    log: the log's end offsets, for the lag; None where the process opened none.
    signals: wakes a waiter when the sessions projection applies a position; None: waiters poll.
    """

    def __init__(
        self,
        settings: Settings,
        stores: Callable[[], Stores],
        log: LogPositions | None,
        signals: CheckpointSignals | None = None,
    ) -> None:
        self._signals = signals
        self._settings = settings
        self._stores = stores
        self._log = log

    def _checkpoints(self, position: Position, archive: bool) -> list[Checkpoints]:
        """Every projection a read draws on must have applied the position."""
        stores = self._stores()
        if position.topic == "threads" and archive:
            return [stores.archive_checkpoints]
        if position.topic == "threads":
            # what the next turn reads: the facts' activity (when they expire) may come later
            return [stores.sessions]
        if position.topic == "facts":
            return [stores.facts]
        if position.topic == "traces":
            return [stores.traces]
        if position.topic == "privacy":
            return [stores.privacy_checkpoints]
        raise InvalidEvent("after", f"{position.token()} is not a position of the threads, facts or traces topic")

    async def reached(self, position: Position, seconds: float, *, archive: bool = False) -> bool:
        """Whether the projections reach the position within `seconds`."""
        checkpoints = self._checkpoints(position, archive)
        if position.partition >= self._settings.partitions:
            raise InvalidEvent("after", f"{position.token()} names a partition the topic does not have")
        deadline = time.monotonic() + seconds
        delay = 0.005
        while True:
            moved = None if self._signals is None else self._signals.armed()
            if await self._applied(position, checkpoints):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if moved is not None and self._signals is not None and self._signals.live:
                # woken by the sessions projection's next move; a move of another kind is polled for
                await self._signals.wait(moved, min(SIGNALLED_POLL_SECONDS, remaining))
            else:
                await asyncio.sleep(min(delay, remaining))
                delay = min(delay * 2, 0.1)

    @staticmethod
    async def _applied(position: Position, checkpoints: list[Checkpoints]) -> bool:
        for checkpoints_of in checkpoints:  # in order, the cheapest first
            if await checkpoints_of.applied(position.topic, position.partition) < position.offset:
                return False
        return True

    async def close(self) -> None:
        if self._signals is not None:
            await self._signals.close()

    async def wait(self, position: Position, wait: float | None = None, *, archive: bool = False) -> None:
        """Wait for one position, at most MEMLOG_READ_WAIT_SECONDS; NotCaughtUp past it."""
        limit = self._settings.read_wait_seconds
        if not await self.reached(position, limit if wait is None else min(wait, limit), archive=archive):
            raise NotCaughtUp(f"the {position.topic} projection has not reached {position.token()} yet")

    async def wait_all(self, after: str | None, wait: float | None = None, *, archive: bool = False) -> None:
        """`after` is one position token or several, comma-separated (an exchange and a fact, say)."""
        if after is None:
            return
        for token in after.split(","):
            await self.wait(Position.parse(token.strip()), wait, archive=archive)

    async def lag(self) -> LagReport:
        """Records not yet applied, per projection and partition; raises when Kafka, Redis or MongoDB is down."""
        if self._log is None:
            raise LogUnavailable("this process reads no log positions")
        stores = self._stores()
        projections: list[tuple[str, str, Checkpoints]] = [
            ("sessions", "threads", stores.sessions),
            ("facts-activity", "threads", stores.fact_activity),
            ("archive", "threads", stores.archive_checkpoints),
            ("facts", "facts", stores.facts),
            ("traces", "traces", stores.traces),
            ("privacy", "privacy", stores.privacy_checkpoints),
        ]
        ends = await self._log.ends(LAGGING_TOPICS)
        lags = []
        for name, short, checkpoints in projections:
            for p in range(self._settings.partitions):
                applied = await checkpoints.applied(short, p)
                lags.append(Lag(name, short, p, max(0, ends[(short, p)] - 1 - applied), applied))
        return LagReport(tuple(lags), await stores.counters.dead_letters())
