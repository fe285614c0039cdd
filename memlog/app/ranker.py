"""Where a search's CPU work runs: processes of their own, off the API's event loop and its lock.

Ranking (projections/ranking.py) tokenises every candidate's text, about 10 ms a 22 KB exchange in pure
Python, and centring a neighbour's excerpt on its match costs a few ms more. In a thread of the API
that work still holds the interpreter's lock: the event loop then waits up to the switch interval (5 ms)
each time it wakes, several times for one /healthz answer, and /healthz took 60 to 120 ms during an
agent's common-word search of 1,200 exchanges of 22 KB (issue 41). In a process of its own it holds no
lock of the API's: the loop's part is handing over the candidates (pickled by the executor's thread,
a copy of bytes) and reading back one page.

The processes are spawned (nothing of the API's threads, sockets or clients is forked), at most
`workers`, at the first search; a process that dies (killed, out of memory) breaks the pool, and the
next call opens a new one.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Any, TypeVar

from projections.archives import match

T = TypeVar("T")

WORKERS = min(2, os.cpu_count() or 1)  # a search's ranking uses one core; two let a second search rank meanwhile
# niceness of the processes: when the machine is busy, the API's loop (and the stores) get a core first when
# they wake, and the ranking the time left (on 2 loaded cores the loop's pauses were time spent waiting
# for a core, not running)
NICE = 10
BROKEN = 3

log = logging.getLogger(__name__)


class Ranker:
    """Args:
    workers: the processes a search's CPU work runs in, at most.
    """

    def __init__(self, workers: int = WORKERS) -> None:
        self._workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._broken = 0  # pools broken in a row

    async def run(self, work: Callable[..., T], *args: Any, **options: Any) -> T:
        """`work(*args, **options)` in a process of the pool (a function of a module and picklable
        arguments). When the pool breaks (a process killed, or one that cannot start: a main module that
        runs its program when imported again), this call runs in a thread, and the next in a new pool;
        after BROKEN pools in a row, every call runs in a thread (logged)."""
        if self._broken >= BROKEN:
            return await asyncio.to_thread(work, *args, **options)
        try:
            found = await asyncio.get_running_loop().run_in_executor(self._open(), partial(work, *args, **options))
        except BrokenProcessPool:
            self.close()
            self._broken += 1
            log.warning("the ranking processes stopped (%d in a row); this search ranks in a thread", self._broken)
            return await asyncio.to_thread(work, *args, **options)
        self._broken = 0
        return found

    def _open(self) -> ProcessPoolExecutor:
        if self._pool is None:
            spawn = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                self._workers, mp_context=spawn, initializer=_start_worker, initargs=(os.getpid(),)
            )
        return self._pool

    def close(self) -> None:
        """Stops the processes (the work they run is dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _start_worker(parent: int) -> None:
    """A ranking process: at a lower priority, and gone within a second of its parent (a SIGKILLed API
    leaves no orphan: the pool's own shutdown never runs then)."""
    os.nice(NICE)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the process group: the API stops its pool

    def orphaned() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=orphaned, name="orphan-watch", daemon=True).start()


async def off_loop(ranker: Ranker | None, work: Callable[..., T], *args: Any, **options: Any) -> T:
    """In the ranker's processes; without one (a store in memory, a test), in a thread."""
    if ranker is None:
        return await asyncio.to_thread(work, *args, **options)
    return await ranker.run(work, *args, **options)


def centres(query: str, texts: list[str]) -> list[int]:
    """Where each text's excerpt centres: on the query's match when it has one, else its start."""
    return [found.at if (found := match(query, text)) else 0 for text in texts]
