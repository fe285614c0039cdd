"""A worker stops within MEMLOG_WORKER_STOP_SECONDS of being asked, whatever the broker's state.

Faust's graceful stop commits offsets and leaves the group; with Kafka away its consumer thread
waits for the broker, and mode gives that thread 60 s before it moves on (a worker took 62 s to exit
after SIGTERM with its broker stopped). Nothing is lost by cutting that short: every projection is
idempotent by position and resumes from its own checkpoint, so what the stop did not commit is
applied again, as no-ops, by the next worker. So a stop request also starts a timer on a thread of
its own that ends the process when the bound passes, even if the event loop is stuck.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any

import faust

from streams.faults import FaultHooks

log = logging.getLogger(__name__)


class StopDeadline:
    """Once started, ends the process `seconds` later with the code it was started with."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.code: int | None = None
        self._timer: threading.Timer | None = None

    def start(self, code: int) -> None:
        """The first request sets the code; later ones (a second signal) change nothing."""
        if self._timer is not None:
            return
        self.code = code
        self._timer = threading.Timer(self.seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        log.warning(
            "the worker has not stopped %.0fs after it was asked to (MEMLOG_WORKER_STOP_SECONDS): exiting now "
            "with code %d; what it did not commit is applied again, as no-ops, by the next worker",
            self.seconds,
            self.code,
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(self.code or 0)


class Worker(faust.Worker):
    """Faust's worker whose stop, on a signal or on the watchdog's request, is bounded by a StopDeadline.

    Named as Faust's, so its log lines read the same ("[^Worker]: Ready").

    With fault hooks, SIGUSR1 and SIGUSR2 make it stall (streams/faults.py) instead of mode's default
    (a stack dump, and a debugger that would wait on a terminal no worker has).
    """

    def __init__(self, app: Any, *, deadline: StopDeadline, faults: FaultHooks | None = None, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.deadline = deadline
        self.faults = faults

    def stop_with(self, code: int) -> None:
        """Stop gracefully, then exit with `code` (or exit with it when the deadline passes first)."""
        self.deadline.start(code)
        self._schedule_shutdown(signal.SIGTERM)

    def _on_sigterm(self) -> None:
        self.deadline.start(0)
        super()._on_sigterm()

    def _on_sigint(self) -> None:
        self.deadline.start(0)
        super()._on_sigint()

    def _on_sigusr1(self) -> None:
        if self.faults is None:
            super()._on_sigusr1()
        else:
            self.faults.stop_fetching()

    def _on_sigusr2(self) -> None:
        if self.faults is None:
            super()._on_sigusr2()
        else:
            self.faults.hang_agents()
