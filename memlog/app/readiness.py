"""Whether every projection has applied the log: what /readyz answers and what /metrics shows of the lag.

Ready when every projection (sessions, facts-activity, archive, facts, traces, privacy) is within
MEMLOG_READY_MAX_LAG of the log's end, and none has held a lag without applying anything for
MEMLOG_READY_STALL_SECONDS: a lag that does not shrink is a fault whatever its size (DESIGN, "Each
projection resumes where it stopped"). Progress is judged between two reports, so the first report
of a process never calls a projection stalled; the readiness probe asks every few seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memlog.app.positions import LagReport, Positions
from memlog.config.settings import Settings
from schemas.errors import LogUnavailable, StoreUnavailable
from streams.metrics import Metrics
from streams.progress import ProgressClock, Reading, stalled


@dataclass(frozen=True)
class Readiness:
    ready: bool
    report: LagReport
    stalled: dict[str, dict[str, float]]  # "<projection>/<topic>.<partition>" -> its lag and seconds without progress

    def view(self) -> dict[str, Any]:
        return {"ready": self.ready, **self.report.view(), "stalled": self.stalled}


class ReadinessCheck:
    """The lag report, and which projections have held a lag without moving for too long.

    Args:
        settings: MEMLOG_READY_MAX_LAG and MEMLOG_READY_STALL_SECONDS.
        positions: the lag report.
        metrics: where the lag and the stalls are shown (`memlog_consumer_lag`, `memlog_projection_stalled`).
        clock: monotonic seconds.
    """

    def __init__(
        self,
        settings: Settings,
        positions: Positions,
        metrics: Metrics | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._positions = positions
        self._metrics = metrics
        self._clock = clock
        self._progress = ProgressClock()

    async def check(self) -> Readiness:
        """Raises LogUnavailable or StoreUnavailable when Kafka, Redis or MongoDB does not answer."""
        try:
            report = await self._positions.lag()
        except (LogUnavailable, StoreUnavailable):
            self._progress.forget()  # standing still while a service was away is no stall
            raise
        readings = [Reading(lag.projection, lag.topic, lag.partition, lag.applied, lag.records) for lag in report.lags]
        stuck = stalled(self._progress.observe(readings, self._clock()), self._settings.ready_stall_seconds)
        if self._metrics is not None:
            for lag in report.lags:
                self._metrics.lag.labels(lag.projection, lag.topic, str(lag.partition)).set(lag.records)
            names = {b.reading.projection for b in stuck}
            for projection in {lag.projection for lag in report.lags}:
                self._metrics.stalled.labels(projection).set(1 if projection in names else 0)
        return Readiness(
            ready=not stuck and report.caught_up(self._settings.ready_max_lag),
            report=report,
            stalled={b.reading.name: {"lag": b.reading.lag, "idle_seconds": round(b.idle_seconds, 1)} for b in stuck},
        )
