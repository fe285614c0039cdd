"""Two running workers under one static name (MEMLOG_WORKER_INSTANCE given to both).

Kafka gives a static name's partitions to the worker that joined under it last. The other learns it at
its next heartbeat, when the coordinator no longer knows its member id; it joins again, and that takes
the partitions back from the first. Measured here: the two take turns every three seconds (a
heartbeat) for as long as both run, each revoking and resuming all its partitions every time, with only
aiokafka's WARNING to show for it. A worker that loses its member id that way `limit` times within
`window_seconds` says so and starts again as a dynamic member, instead of joining under the name once
more: the other keeps the name and is never displaced again, so only one of the two restarts. Nothing
else takes a member id away that often (an expired session does it once).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

LIMIT = 5
WINDOW_SECONDS = 60.0
# What aiokafka logs when a heartbeat finds its member id unknown, just before it joins again.
COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"
UNKNOWN_MEMBER = "local member_id was not recognized"


class NameClash(logging.Handler):
    """Reads aiokafka's coordinator log of a worker with a static name (see `watch`).

    Args:
        name: the worker's MEMLOG_WORKER_INSTANCE.
        restart: starts the worker again as a dynamic member (it does not return).
        limit: member ids lost within `window_seconds` that mean another worker runs under the name.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        name: str,
        restart: Callable[[], None],
        *,
        limit: int = LIMIT,
        window_seconds: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(logging.WARNING)
        self._name = name
        self._restart = restart
        self._limit = limit
        self._window = window_seconds
        self._clock = clock
        self._lost: deque[float] = deque()

    def lost(self) -> bool:
        """Count one lost member id; True when the last `limit` of them fell within the window."""
        now = self._clock()
        self._lost.append(now)
        while self._lost and now - self._lost[0] > self._window:
            self._lost.popleft()
        return len(self._lost) >= self._limit

    def emit(self, record: logging.LogRecord) -> None:
        if UNKNOWN_MEMBER not in record.getMessage() or not self.lost():
            return
        log.error(
            "the consumer group took this worker's member id away %d times in %.0f s: another running "
            "worker has MEMLOG_WORKER_INSTANCE=%s, and each joining under it displaces the other. Give "
            "each worker a name of its own; this one starts again as a dynamic member",
            len(self._lost),
            self._window,
            self._name,
        )
        self._restart()

    def watch(self) -> None:
        """Read the coordinator's log from now on (it is written from the consumer's thread)."""
        logging.getLogger(COORDINATOR_LOGGER).addHandler(self)
