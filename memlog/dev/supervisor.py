"""A child process started again whenever it exits with a failure, after a delay that grows to a bound.

`memlog up` keeps each of its workers (one per set, MEMLOG_UP_WORKER_SETS) this way, apart from the
others: a worker whose watchdog finds it stuck exits with code 75 (streams/watchdog.py), one killed for
memory dies on a signal, and either is started again. A child that exits with 0 was stopped on purpose
and stays stopped.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

FIRST_DELAY_SECONDS = 1.0
MAX_DELAY_SECONDS = 30.0
STEADY_SECONDS = 60.0  # a child that ran this long before failing starts again after the first delay


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Supervised:
    """One child process and its restarts.

    Args:
        name: how the log lines name it ("worker").
        command: its command line.
        env: its environment.
        say: where the start and restart lines go (standard error by default).
        clock: monotonic seconds.
    """

    def __init__(
        self,
        name: str,
        command: list[str],
        env: dict[str, str],
        *,
        say: Callable[[str], None] = _say,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._command = command
        self._env = env
        self._say = say
        self._clock = clock
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._started_at = 0.0
        self._delay = 0.0
        self._restart_at: float | None = None

    @property
    def env(self) -> dict[str, str]:
        return self._env

    def start(self) -> subprocess.Popen[bytes]:
        self.process = subprocess.Popen(self._command, env=self._env)
        self._started_at = self._clock()
        self._restart_at = None
        self._say(f"memlog: the {self.name} runs (pid {self.process.pid})")
        return self.process

    def keep(self) -> bool:
        """Look at the child once: start it again when it failed and its delay is over.

        False once it has exited with 0 (stopped on purpose); True while it runs or will run again.
        """
        now = self._clock()
        if self._restart_at is not None:
            if now >= self._restart_at:
                self.start()
            return True
        assert self.process is not None, "start() first"
        code = self.process.poll()
        if code is None:
            return True
        if code == 0:
            return False
        steady = now - self._started_at >= STEADY_SECONDS
        self._delay = FIRST_DELAY_SECONDS if steady or not self._delay else min(self._delay * 2, MAX_DELAY_SECONDS)
        self.restarts += 1
        self._restart_at = now + self._delay
        self._say(
            f"memlog: the {self.name} exited with {code}; restarting it in {self._delay:.0f}s (restart {self.restarts})"
        )
        return True

    def terminate(self) -> None:
        """SIGTERM, if it runs; a pending restart is dropped."""
        self._restart_at = None
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def wait(self, timeout: float) -> None:
        """Wait for it to exit; SIGKILL when it has not within `timeout`."""
        if self.process is None:
            return
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
