"""A worker restarted under its name (MEMLOG_WORKER_INSTANCE) takes its partitions back at once; two
running workers given one name do not take turns with its partitions for long.

The killed worker's session is set far longer than the read below may wait: a worker that came back
as a new member would see nothing until the group gave up on the old one (the session timeout, or the
rebalance's own timeout, 60 s), so the exchange sent while it was down could not be read in time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import MemlogProcess, free_port, start_api, start_worker
from streams.name_clash import LIMIT
from streams.topics import ensure_topics
from tests.conftest import unique_settings
from tests.e2e.conftest import LOGS, api_client

TENANT = "static"
SESSION_SECONDS = 90.0  # the longest the settings allow
READ_SECONDS = 40.0  # from the kill, its restart included: well under the session and the rebalance timeout

pytestmark = pytest.mark.slow


@pytest.fixture
def named(stack: Settings) -> Iterator[tuple[Settings, MemlogProcess]]:
    settings = unique_settings(
        stack,
        api_port=free_port(),
        worker_session_timeout_seconds=SESSION_SECONDS,
        read_wait_seconds=1.0,
    )
    settings = settings.model_copy(update={"worker_instance": f"{settings.namespace}-worker-0"})
    asyncio.run(ensure_topics(settings))
    api = start_api(settings, LOGS)
    yield settings, api
    api.stop()


async def post(http: httpx.AsyncClient, question: str) -> str:
    response = await http.post("/v1/exchanges", json={"tenant": TENANT, "subject": "ada", "question": question})
    assert response.status_code == 202, response.text
    position: str = response.json()["position"]
    return position


async def questions_within(http: httpx.AsyncClient, after: str, seconds: float) -> list[str] | None:
    """The context's questions once it holds the position, or None if it did not within `seconds`."""
    deadline = time.monotonic() + seconds
    url = f"/v1/tenants/{TENANT}/subjects/ada/context"
    while time.monotonic() < deadline:
        response = await http.get(url, params={"after": after})
        if response.status_code == 200:
            return [exchange["question"] for exchange in response.json()["exchanges"]]
        assert response.status_code == 503, response.text  # not yet applied: the read's bounded wait
        await asyncio.sleep(0.2)
    return None


async def test_a_worker_killed_and_started_again_under_its_name_applies_at_once(
    named: tuple[Settings, MemlogProcess],
) -> None:
    settings, _api = named
    async with api_client(settings) as http:
        worker = start_worker(settings, LOGS)
        try:
            first = await post(http, "one?")
            assert await questions_within(http, first, 120) == ["one?"]
            worker.kill()  # SIGKILL: no leaving the group, its session stays for SESSION_SECONDS
            killed = time.monotonic()
            second = await post(http, "two?")
        finally:
            worker.stop()
        worker = start_worker(settings, LOGS)  # returns once it runs, maybe before it has partitions
        try:
            left = READ_SECONDS - (time.monotonic() - killed)
            assert left > 0, f"the worker was ready {READ_SECONDS - left:.1f} s after the kill"
            assert await questions_within(http, second, left) == ["one?", "two?"]
        finally:
            worker.stop()


CLASHED = "another running worker has MEMLOG_WORKER_INSTANCE="
UNKNOWN = "local member_id was not recognized"


async def test_two_workers_given_one_name_stop_taking_turns_and_both_apply(
    named: tuple[Settings, MemlogProcess],
) -> None:
    settings, _api = named
    first = start_worker(settings, LOGS)
    second = MemlogProcess("worker", settings, LOGS)  # the same name: each fences the other in turn
    try:
        deadline = time.monotonic() + 3 * 60
        while CLASHED not in first.output() + second.output():
            assert time.monotonic() < deadline, "the two workers never saw they share a name"
            assert first.process.poll() is None and second.process.poll() is None
            await asyncio.sleep(1)
        renamed, kept = (first, second) if CLASHED in first.output() else (second, first)
        # what it saw: the other took its member id, LIMIT times (the last restarted it before it was printed)
        assert renamed.output().count(UNKNOWN) >= LIMIT - 1
        # started again in place, as a dynamic member
        renamed.wait_for("[^Worker]: Ready", after=renamed.output().index(CLASHED))
        settled = time.monotonic()
        async with api_client(settings) as http:
            position = await post(http, "after the clash?")
            assert await questions_within(http, position, 120) == ["after the clash?"]
        await asyncio.sleep(max(0.0, 10 - (time.monotonic() - settled)))
        churn = first.output().count(UNKNOWN) + second.output().count(UNKNOWN)
        await asyncio.sleep(15)  # five heartbeats: two workers under one name would fence each other five times
        assert first.output().count(UNKNOWN) + second.output().count(UNKNOWN) == churn
        assert CLASHED not in kept.output(), "only one of the two gives the name up"
        assert first.process.poll() is None and second.process.poll() is None
    finally:
        second.stop()
        first.stop()
