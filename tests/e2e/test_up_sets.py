"""Issue 41, isolation of work: `memlog up` runs its projections in worker sets (MEMLOG_UP_WORKER_SETS),
one supervised process each. The archive's set stalled (SIGSTOP) and then killed (SIGKILL) stops no
other tenant's reads: each write is read back with `after=` in one try within the API's read wait, and
the sessions set never exits; the archive's set, continued and then started again by `memlog up`,
archives everything written meanwhile exactly once.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time

import httpx

from memlog.config.settings import Settings
from memlog.dev.processes import WORKER_READY, MemlogProcess, free_port
from streams.topics import ensure_topics
from tests.conftest import unique_settings
from tests.e2e.conftest import LOGS, api_client
from tests.e2e.reads import archived_questions

READ_WAIT_SECONDS = 15.0  # the API's is 5 s; looser on a busy shared machine (tests/e2e/test_isolation.py)
STALL_SECONDS = 25.0  # longer than the archive set's session timeout (15 s): Kafka drops it from its group
CONTEXT, ARCHIVE = "sessions,facts", "archives"


def pids(up: MemlogProcess) -> dict[str, int]:
    """The running pid of each worker set, from `memlog up`'s own lines (the last start of each)."""
    return {name: int(pid) for name, pid in re.findall(r"the worker (\S+) runs \(pid (\d+)\)", up.output())}


def wait_all_ready(up: MemlogProcess, sets: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while up.output().count(WORKER_READY) < sets:
        assert up.process.poll() is None and time.monotonic() < deadline, up.output()[-3000:]
        time.sleep(0.2)


async def write_and_read(http: httpx.AsyncClient, tenant: str, question: str) -> tuple[str, int, float]:
    """One write, read back once with `after=` (no retry): its position, the read's status and seconds."""
    posted = await http.post("/v1/exchanges", json={"tenant": tenant, "subject": "bo", "question": question})
    assert posted.status_code == 202, posted.text
    position: str = posted.json()["position"]
    started = time.monotonic()
    read = await http.get(f"/v1/tenants/{tenant}/subjects/bo/context", params={"after": position})
    return position, read.status_code, time.monotonic() - started


async def writes_while(http: httpx.AsyncClient, seconds: float, n: int, asked: dict[str, list[str]]) -> list[float]:
    """Two tenants write every half second for `seconds`; every read of each must be 200 at once."""
    took: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        n += 1
        for tenant, questions in asked.items():
            _, status, spent = await write_and_read(http, tenant, f"{tenant} {n}?")
            assert status == 200, (tenant, n, status)
            questions.append(f"{tenant} {n}?")
            took.append(spent)
        await asyncio.sleep(0.5)
    return took


async def test_a_stalled_then_killed_archive_set_stops_no_reads_and_archives_everything_once(stack: Settings) -> None:
    settings = unique_settings(stack, api_port=free_port(), read_wait_seconds=READ_WAIT_SECONDS)
    assert len(settings.up_sets()) == 3 and settings.up_sets()[1] == (ARCHIVE,)  # the default sets
    await ensure_topics(settings)
    up = MemlogProcess("up", settings, LOGS)
    asked: dict[str, list[str]] = {"calm": [], "loud": []}
    try:
        up.wait_for("memlog is up")
        wait_all_ready(up, 3)
        first = pids(up)
        assert set(first) == {CONTEXT, ARCHIVE, "traces,privacy"}
        async with api_client(settings) as http:
            took = await writes_while(http, 1, 0, asked)
            os.kill(first[ARCHIVE], signal.SIGSTOP)  # the archive's set stalls: no batch, no heartbeat
            try:
                took += await writes_while(http, STALL_SECONDS, 100, asked)
            finally:
                os.kill(first[ARCHIVE], signal.SIGCONT)
            os.kill(first[ARCHIVE], signal.SIGKILL)  # and dies: `memlog up` starts that set, only that one, again
            took += await writes_while(http, 3, 200, asked)
            up.wait_for(f"the worker {ARCHIVE} exited with -9")
            for tenant, questions in asked.items():
                last, _, _ = await write_and_read(http, tenant, f"{tenant} last?")
                questions.append(f"{tenant} last?")
                assert await archived_questions(http, tenant, "bo", last) == questions  # each once, in order
        print(f"reads with after= while the archive set was stalled or dead: {len(took)}, max {max(took):.2f}s")
        now = pids(up)
        assert now[CONTEXT] == first[CONTEXT] and now["traces,privacy"] == first["traces,privacy"]
        assert now[ARCHIVE] != first[ARCHIVE]
        assert f"the worker {CONTEXT} exited" not in up.output()
        assert "the worker traces,privacy exited" not in up.output()
    finally:
        up.stop()
    assert up.process.returncode == 0, up.output()[-3000:]
