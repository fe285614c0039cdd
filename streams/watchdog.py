"""The worker's watchdog: a consumer that stops while its partitions have lag is restarted, then given up on.

Faust has a known failure class where a worker stops consuming and says nothing (faust-streaming
issues #166, #549, #629, #640), and a projection can also sit behind the group's offset with
nothing left to fetch. Either way a lag stays and nothing is applied. Every few seconds the
watchdog reads, for each partition the worker holds, the log's end offset and the checkpoint of
every projection that reads it. When one of them has had lag and applied nothing for
MEMLOG_WATCHDOG_SECONDS, it restarts the consumer: it asks the group coordinator for a rejoin, so
Faust revokes and reassigns the partitions, every projection resumes from its own checkpoint
(streams/resume.py), the fetcher is started again and every paused partition resumed. If no stalled
projection has moved MEMLOG_WATCHDOG_SECONDS after that, the worker stops with exit code 75, for a
supervisor (`memlog up`, Kubernetes, compose) to start a fresh one.

While Kafka or a store is away nothing moves and a restart would not help: such a round counts
for nothing, and every clock starts afresh once the service answers again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from schemas.errors import LogUnavailable, StoreUnavailable
from streams.metrics import Metrics
from streams.positions import LogPositions
from streams.progress import Behind, ProgressClock, Reading, stalled, working
from streams.projector import Projector

log = logging.getLogger(__name__)

WATCHDOG_EXIT_CODE = 75  # EX_TEMPFAIL (sysexits.h): a temporary failure, worth starting again
MAX_INTERVAL_SECONDS = 5.0
CHECKPOINT_TIMEOUT_SECONDS = 10.0  # a store that does not answer within this is treated as away


class Consumer(Protocol):
    """What the watchdog needs of the worker's consumer."""

    def assignment(self) -> set[tuple[str, int]]:
        """The (full topic name, partition) pairs it holds."""
        ...

    def restart(self) -> None:
        """Revoke and reassign its partitions, as a rebalance does."""
        ...


class Watchdog:
    """Watches one worker's projections; see the module's docstring.

    Args:
        projectors: every projector the worker runs.
        consumer: the worker's consumer.
        ends: reads the log's end offsets.
        metrics: the worker's series (`memlog_projection_stalled`, `memlog_watchdog_actions`).
        seconds: MEMLOG_WATCHDOG_SECONDS.
        batch_seconds: MEMLOG_WATCHDOG_BATCH_SECONDS: how long a batch in progress counts as progress.
        give_up: stops the worker with the exit code it is given.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        *,
        projectors: Sequence[Projector[Any]],
        consumer: Consumer,
        ends: LogPositions,
        metrics: Metrics,
        seconds: float,
        give_up: Callable[[int], None],
        batch_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._projectors = list(projectors)
        self._by_topic: dict[str, list[Projector[Any]]] = {}
        for projector in projectors:
            self._by_topic.setdefault(projector.source_topic, []).append(projector)
        self._consumer = consumer
        self._ends = ends
        self._metrics = metrics
        self.seconds = seconds
        self.batch_seconds = batch_seconds
        self.interval = min(MAX_INTERVAL_SECONDS, seconds / 4)
        self._give_up = give_up
        self._clock = clock
        self._progress = ProgressClock()
        self._restarted_at: float | None = None
        self._last_check = clock()
        self._stuck: list[Behind] = []
        self.restarts = 0
        self.gave_up = False
        for projector in projectors:
            metrics.stalled.labels(projector.name).set(0)

    async def run(self) -> None:
        """Check every `interval` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.check()
            except Exception:  # a watchdog that fails stops vouching for the worker: /healthz turns 503
                log.exception("watchdog: the check failed")
                continue
            self._last_check = self._clock()

    async def check(self) -> None:
        """One round: read, compare, and restart the consumer or give up when a stall lasts."""
        if self.gave_up:
            return
        now = self._clock()
        away = [p.name for p in self._projectors if p.unavailable]
        try:
            readings = [] if away else await self._read()
        except (LogUnavailable, StoreUnavailable) as exc:
            away = [str(exc)]
        if away:
            self._outage(now)
            log.debug("watchdog: a service is away (%s); no verdict", ", ".join(away))
            return
        started = {p.name: p.batch_started for p in self._projectors}
        stuck = stalled(self._progress.observe(readings, now), self.seconds, working(started, now, self.batch_seconds))
        self._stuck = stuck
        names = {b.reading.projection for b in stuck}
        for projector in self._projectors:
            self._metrics.stalled.labels(projector.name).set(1 if projector.name in names else 0)
        if not stuck:
            if self._restarted_at is not None:
                log.info("watchdog: every projection moves again after the consumer restart")
                self._restarted_at = None
            return
        seen = "; ".join(b.describe() for b in stuck)
        if self._restarted_at is None:
            log.warning("watchdog: lag and nothing applied on %s: restarting the consumer", seen)
            self._metrics.watchdog.labels("restart").inc()
            self.restarts += 1
            self._restarted_at = now
            self._consumer.restart()
        elif now - self._restarted_at >= self.seconds:
            log.warning(
                "watchdog: still nothing applied %.0fs after restarting the consumer (%s): exiting with code %d "
                "for a supervisor to start the worker again",
                now - self._restarted_at,
                seen,
                WATCHDOG_EXIT_CODE,
            )
            self._metrics.watchdog.labels("exit").inc()
            self.gave_up = True
            self._give_up(WATCHDOG_EXIT_CODE)

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        """Alive unless the watchdog gave up, or has not finished a round for twice its bound (a stuck loop).

        Called from the metrics endpoint's thread: it only reads what the loop last wrote.
        """
        since = self._clock() - self._last_check
        alive = not self.gave_up and since < 2 * self.seconds
        return alive, {
            "alive": alive,
            "checked_seconds_ago": round(since, 1),
            "stalled": [b.describe() for b in self._stuck],
            "consumer_restarts": self.restarts,
            "gave_up": self.gave_up,
        }

    def _outage(self, now: float) -> None:
        self._progress.forget()
        self._stuck = []
        if self._restarted_at is not None:  # the restart gets its full time once the service is back
            self._restarted_at = now

    async def _read(self) -> list[Reading]:
        held = sorted(tp for tp in self._consumer.assignment() if tp[0] in self._by_topic)
        if not held:
            return []
        # each projector's held partitions, read in one round trip per projector
        wanted = [
            (projector, [partition for held_topic, partition in held if held_topic == topic])
            for topic in sorted({topic for topic, _ in held})
            for projector in self._by_topic[topic]
        ]
        ends = await self._ends.ends({projector.topic for projector, _ in wanted})
        try:
            applied = await asyncio.wait_for(
                asyncio.gather(*(projector.applied_many(partitions) for projector, partitions in wanted)),
                CHECKPOINT_TIMEOUT_SECONDS,
            )
        except TimeoutError as exc:
            raise StoreUnavailable(f"checkpoints unread within {CHECKPOINT_TIMEOUT_SECONDS:.0f}s") from exc
        return [
            Reading.at(projector.name, projector.topic, partition, offset, ends[(projector.topic, partition)])
            for (projector, partitions), offsets in zip(wanted, applied, strict=True)
            for partition, offset in zip(partitions, offsets, strict=True)
        ]
