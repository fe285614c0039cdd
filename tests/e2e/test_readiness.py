"""/readyz names every projection, and a projection that holds a lag without moving makes it 503, whatever the lag."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

from memlog.config.settings import Settings
from memlog.dev.processes import start_api, start_worker
from streams.topics import ensure_topics
from tests.e2e.conftest import LOGS, api_client, own_settings

PROJECTIONS = {"sessions", "facts-activity", "archive", "facts", "traces", "privacy"}
STALL_SECONDS = 2.0
CATCH_UP_BOUND = 120.0  # a bound on waiting for the worker, not a timing check


def stalled_series(metrics: str) -> dict[str, str]:
    return dict(re.findall(r'memlog_projection_stalled\{projection="([a-z-]+)"\} (\S+)', metrics))


async def test_a_projection_with_lag_that_does_not_move_turns_readyz_503_though_its_lag_is_tolerated(
    stack: Settings,
) -> None:
    # a lag of a thousand is tolerated; a small lag that does not move for two seconds is not
    settings = own_settings(stack, ready_max_lag=1000, ready_stall_seconds=STALL_SECONDS)
    await ensure_topics(settings)
    api = start_api(settings, LOGS)
    worker = None
    try:
        async with api_client(settings) as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert {name.split("/")[0] for name in ready.json()["lag"]} == PROJECTIONS
            assert f"privacy/privacy.{settings.partitions - 1}" in ready.json()["lag"]

            # no worker runs: nothing applies this exchange
            body = {"tenant": f"ready-{uuid.uuid4().hex[:8]}", "subject": "ann", "question": "q", "answer": "a"}
            accepted = await http.post("/v1/exchanges", json=body)
            assert accepted.status_code == 202, accepted.text
            partition = accepted.json()["position"].split(".")[1]
            lagging = await http.get("/readyz")
            assert lagging.status_code == 200, lagging.text  # behind, within the bound, not yet for long
            behind = lagging.json()["lag"][f"sessions/threads.{partition}"]
            assert behind > 0  # the exchange's events (question, answer)

            await asyncio.sleep(STALL_SECONDS + 0.5)
            stalled = await http.get("/readyz")
            assert stalled.status_code == 503, stalled.text
            assert stalled.headers["retry-after"]
            assert set(stalled.json()["stalled"]) == {
                f"{name}/threads.{partition}" for name in ("sessions", "facts-activity", "archive")
            }
            assert stalled.json()["stalled"][f"archive/threads.{partition}"]["lag"] == behind
            series = stalled_series((await http.get("/metrics")).text)
            assert series["sessions"] == "1.0" and series["archive"] == "1.0" and series["privacy"] == "0.0"

            worker = start_worker(settings, LOGS)
            deadline = time.monotonic() + CATCH_UP_BOUND
            while (ready := await http.get("/readyz")).status_code != 200:
                assert time.monotonic() < deadline, ready.text
                await asyncio.sleep(0.5)
            assert ready.json()["stalled"] == {}
            assert set(stalled_series((await http.get("/metrics")).text).values()) == {"0.0"}
    finally:
        api.stop()
        if worker is not None:
            worker.stop()
