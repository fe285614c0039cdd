"""Issue 41, one replay at a time: a replay through the API and one from the CLI, started together
while a writer posts 10 exchanges a second, share one lease in MongoDB. Exactly one runs and switches
the namespace (from the one it started from); the other is refused. Every exchange the API accepted
meanwhile is in its subject's context afterwards."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator

import httpx
import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import settings_env
from tests.e2e.conftest import api_client, memlog, own_settings, replayed
from tests.e2e.reads import until_ok

TENANT = "replayed"
SUBJECTS = [f"w{n}" for n in range(10)]  # round robin: no subject reaches a fold's 100 exchanges


@pytest.fixture
def running(stack: Settings) -> Iterator[Settings]:
    with memlog(own_settings(stack)) as settings:
        yield settings


async def writer(http: httpx.AsyncClient, stop: asyncio.Event, accepted: dict[str, list[tuple[str, str]]]) -> None:
    """10 exchanges a second, each kept by subject with its position when the API accepted it."""
    n = 0
    while not stop.is_set():
        subject = SUBJECTS[n % len(SUBJECTS)]
        question = f"question number {n}?"
        response = await http.post(
            "/v1/exchanges", json={"tenant": TENANT, "subject": subject, "question": question, "answer": "ok"}
        )
        if response.status_code == 202:
            accepted.setdefault(subject, []).append((question, response.json()["position"]))
        n += 1
        await asyncio.sleep(0.1)


async def api_replay(http: httpx.AsyncClient) -> dict[str, object]:
    body = {"projection": "all", "switch": True, "workers": 2}
    return await replayed(http, body, pause=0.2, tries=3000, refused=True)


async def cli_replay(settings: Settings) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memlog",
        "replay",
        env=settings_env(settings),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    return int(process.returncode or 0), out.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_an_api_and_a_cli_replay_started_together_run_one_at_a_time(running: Settings) -> None:
    settings = running
    accepted: dict[str, list[tuple[str, str]]] = {}
    stop = asyncio.Event()
    async with api_client(settings) as http:
        writing = asyncio.create_task(writer(http, stop, accepted))
        await asyncio.sleep(3)  # something to replay
        (api, (code, output)) = await asyncio.gather(api_replay(http), cli_replay(settings))
        await asyncio.sleep(2)  # the writer goes on across the switch
        stop.set()
        await writing
        print(f"api replay: {api}\ncli replay: exit {code}: {output[-600:]}")
        api_ran = api["state"] == "done"
        cli_ran = code == 0
        assert api_ran != cli_ran, (api, code, output[-2000:])  # exactly one ran
        if api_ran:
            assert api["switched"] is True
            assert "a replay is running already" in output
        else:
            assert api["state"] == "refused" and "a replay is running already" in str(api["detail"])
            assert "reads now use" in output
        missing = {}
        for subject, kept in accepted.items():
            after = kept[-1][1]
            response = await until_ok(http, f"/v1/tenants/{TENANT}/subjects/{subject}/context", {"after": after})
            assert response.status_code == 200, response.text[:500]
            held = {exchange["question"] for exchange in response.json()["exchanges"]}
            missing[subject] = [question for question, _ in kept if question not in held]
    assert sum(len(kept) for kept in accepted.values()) > 50
    assert all(not lost for lost in missing.values()), missing
