"""A worker whose consumer stops is restarted and catches up; a worker asked to stop exits within its bound.

The stalls are made from inside the worker by its fault hooks (MEMLOG_WORKER_FAULT_SIGNALS):
SIGUSR1 stops its consumer fetching, as Faust's known silent stops do; SIGUSR2 hangs its agents,
which only a new process cures. Kafka is stopped only where it is a broker of the test's own.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest

from memlog.adapters.mongo_entries import GROUPS, entry_docs
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from memlog.dev.processes import MemlogProcess, free_port, start_api, start_worker
from streams.topics import ensure_topics
from tests.conftest import unique_settings
from tests.e2e.conftest import LOGS, api_client
from tests.own_kafka import own_kafka

TENANT = f"watchdog-{uuid.uuid4().hex[:8]}"
SUBJECTS = ("ann", "bob", "cyd", "dee")
BEFORE = 10  # exchanges per subject before the stall
AFTER = 20  # ... and after it
WATCHDOG_SECONDS = 4.0
STALL_BOUND = 120.0  # a bound on waiting for the watchdog and the catch-up, not a timing check


def stalling_settings(stack: Settings, member: str = "dynamic") -> Settings:
    settings = unique_settings(
        stack,
        api_port=free_port(),
        worker_metrics_port=free_port(),
        watchdog_seconds=WATCHDOG_SECONDS,
        worker_fault_signals=True,
    )
    if member == "static":  # a rejoin of a static member may be answered without a rebalance
        settings = settings.model_copy(update={"worker_instance": f"{settings.namespace}-0"})
    return settings


# A consumer restart must work for a worker in its group as a new member each time (the manifests') and
# for one under a fixed name (MEMLOG_WORKER_INSTANCE, as `memlog up` runs it).
MEMBERS = pytest.mark.parametrize("member", ["dynamic", "static"])


async def record(http: httpx.AsyncClient, numbers: range) -> dict[str, str]:
    """Exchanges `numbers` of every subject; the position of each subject's last one."""
    last: dict[str, str] = {}
    for number in numbers:
        for subject in SUBJECTS:
            body = {"tenant": TENANT, "subject": subject, "question": f"{subject} q{number}", "answer": f"a{number}"}
            response = await http.post("/v1/exchanges", json=body)
            assert response.status_code == 202, response.text
            last[subject] = response.json()["position"]
    return last


async def read_back_exactly_once(http: httpx.AsyncClient, last: dict[str, str], total: int) -> None:
    deadline = time.monotonic() + STALL_BOUND
    for subject in SUBJECTS:
        context = f"/v1/tenants/{TENANT}/subjects/{subject}/context"
        while (response := await http.get(context, params={"after": last[subject]})).status_code == 503:
            assert time.monotonic() < deadline, f"{subject} never caught up"
        assert response.status_code == 200, response.text
        exchanges = response.json()["exchanges"]
        assert [e["question"] for e in exchanges] == [f"{subject} q{n}" for n in range(total)]
        assert len({e["exchange_id"] for e in exchanges}) == total


@MEMBERS
async def test_a_consumer_that_stops_fetching_is_restarted_by_the_watchdog_and_catches_up(
    stack: Settings, member: str
) -> None:
    settings = stalling_settings(stack, member)
    await ensure_topics(settings)
    worker = start_worker(settings, LOGS)
    api = start_api(settings, LOGS)
    try:
        async with api_client(settings) as http:
            await read_back_exactly_once(http, await record(http, range(BEFORE)), BEFORE)
            os.kill(worker.process.pid, signal.SIGUSR1)
            worker.wait_for("fault hook: the consumer stops fetching")
            last = await record(http, range(BEFORE, BEFORE + AFTER))
            worker.wait_for("restarting the consumer", timeout=STALL_BOUND)
            await read_back_exactly_once(http, last, BEFORE + AFTER)

            assert worker.process.poll() is None, "the consumer restart was enough: the worker runs on"
            assert "exiting with code 75" not in worker.output()
            assert re.search(r"lag and nothing applied on .*threads\.\d+ lag \d+, idle \d+s", worker.output())
            worker_url = f"http://127.0.0.1:{settings.worker_metrics_port}"
            health = await http.get(f"{worker_url}/healthz")
            assert health.status_code == 200 and health.json()["consumer_restarts"] >= 1, health.text
            metrics = (await http.get(f"{worker_url}/metrics")).text
            assert 'memlog_watchdog_actions_total{action="restart"}' in metrics
    finally:
        api.stop()
        worker.stop()


async def archived(settings: Settings) -> Counter[str]:
    """Archived entries per exchange of the test's tenant."""
    client = mongo_client(settings.mongo)
    try:
        per_exchange: Counter[str] = Counter()
        async for group in client[settings.mongo_db_name][GROUPS].find({"tenant": TENANT}, {"m": 1}):
            for doc in entry_docs(group):
                per_exchange[doc["exchange_id"]] += 1
        return per_exchange
    finally:
        await client.close()


@MEMBERS
async def test_a_projection_left_behind_with_nothing_left_to_fetch_is_caught_up_by_a_consumer_restart(
    stack: Settings, member: str
) -> None:
    settings = stalling_settings(stack, member)
    await ensure_topics(settings)
    worker = start_worker(settings, LOGS)
    api = start_api(settings, LOGS)
    try:
        async with api_client(settings) as http:
            last = await record(http, range(BEFORE))
            await read_back_exactly_once(http, last, BEFORE)
            deadline = time.monotonic() + STALL_BOUND
            while (ready := await http.get("/readyz")).status_code != 200:
                assert time.monotonic() < deadline, ready.text
                await asyncio.sleep(0.2)
            before = await archived(settings)
            assert len(before) == len(SUBJECTS) * BEFORE

            # What a stop mid-batch once left for good: the archive's checkpoint behind, while the
            # consumer stands at the end of the partition and has nothing more to fetch.
            _, partition, offset = last["ann"].split(".")
            client = mongo_client(settings.mongo)
            try:
                await client[settings.mongo_db_name]["applied"].update_one(
                    {"_id": f"archive:threads:{partition}"}, {"$set": {"offset": int(offset) - 5}}
                )
            finally:
                await client.close()

            worker.wait_for("restarting the consumer", timeout=STALL_BOUND)
            while (ready := await http.get("/readyz")).status_code != 200:
                assert time.monotonic() < deadline + STALL_BOUND, ready.text
                await asyncio.sleep(0.2)
            assert await archived(settings) == before  # the events applied again, as no-ops
            assert worker.process.poll() is None
            assert re.search(rf"on archive/threads\.{partition} lag \d+, idle \d+s: restarting", worker.output())
    finally:
        api.stop()
        worker.stop()


async def test_a_worker_whose_agents_hang_exits_and_memlog_up_starts_it_again(stack: Settings) -> None:
    # one worker running every projection: SIGUSR2 hangs all its agents (tests/e2e/test_up_sets.py has the sets)
    settings = stalling_settings(stack).model_copy(update={"up_worker_sets": "all"})
    await ensure_topics(settings)
    up = MemlogProcess("up", settings, LOGS)
    try:
        up.wait_for("memlog is up")
        first = int(re.findall(r"the worker runs \(pid (\d+)\)", up.output())[-1])
        async with api_client(settings) as http:
            await read_back_exactly_once(http, await record(http, range(BEFORE)), BEFORE)
            os.kill(first, signal.SIGUSR2)
            last = await record(http, range(BEFORE, BEFORE + AFTER))
            up.wait_for("restarting it", timeout=STALL_BOUND)
            await read_back_exactly_once(http, last, BEFORE + AFTER)

        output = up.output()
        assert "restarting the consumer" in output  # the first remedy came first, and did not help
        assert "the worker exited with 75" in output
        second = int(re.findall(r"the worker runs \(pid (\d+)\)", output)[-1])
        assert second != first
    finally:
        up.stop()
    assert up.process.returncode == 0, up.output()[-3000:]


@pytest.mark.slow
def test_a_worker_stopped_while_its_kafka_is_down_exits_within_its_bound(stack: Settings, tmp_path: Path) -> None:
    with own_kafka(stack, tmp_path / "home") as (own, broker):
        settings = unique_settings(own, worker_stop_seconds=10.0)
        asyncio.run(ensure_topics(settings))
        worker = start_worker(settings, LOGS)
        try:
            broker.stop()
            time.sleep(3)  # the worker notices: its fetches and heartbeats fail
            asked = time.monotonic()
            os.kill(worker.process.pid, signal.SIGTERM)
            try:
                worker.process.wait(timeout=settings.worker_stop_seconds + 20)  # the bound, and a margin
            except subprocess.TimeoutExpired:
                pytest.fail(f"still running {time.monotonic() - asked:.0f}s after SIGTERM:\n{worker.output()[-3000:]}")
            took = time.monotonic() - asked
            print(f"exited with {worker.process.returncode} {took:.1f}s after SIGTERM", file=sys.stderr)
            assert worker.process.returncode == 0, worker.output()[-3000:]
        finally:
            worker.kill()
