"""A worker killed with SIGKILL mid-stream loses nothing and applies nothing twice."""

from __future__ import annotations

import asyncio
import time

import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import free_port, start_api, start_worker
from streams.topics import ensure_topics
from tests.conftest import unique_settings
from tests.e2e.conftest import LOGS, api_client
from tests.e2e.reads import archived_questions

SUBJECTS = 100
PER_SUBJECT = 50  # 5,000 exchanges, 15,000 events
IN_FLIGHT = 16


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_every_exchange_is_in_its_session_exactly_once_after_a_sigkill(stack: Settings) -> None:
    settings = unique_settings(stack, api_port=free_port())
    await ensure_topics(settings)
    worker = start_worker(settings, LOGS)
    api = start_api(settings, LOGS)
    last_position: dict[str, str] = {}
    posted = 0
    killed_at = restarted_at = -1
    try:
        async with api_client(settings) as http:

            async def post_subject(subject: str) -> None:
                nonlocal posted
                for number in range(PER_SUBJECT):
                    response = await http.post(
                        "/v1/exchanges",
                        json={
                            "tenant": "crash",
                            "subject": subject,
                            "question": f"{subject} q{number}",
                            "tool_calls": [{"name": "count", "arguments": {"n": number}, "result": number}],
                            "answer": f"a{number}",
                        },
                    )
                    assert response.status_code == 202, response.text
                    last_position[subject] = response.json()["position"]
                    posted += 1

            async def chaos() -> None:
                nonlocal killed_at, restarted_at, worker
                while posted < 1500:
                    await asyncio.sleep(0.05)
                killed_at = posted
                worker.kill()
                while posted < 3000:
                    await asyncio.sleep(0.05)
                restarted_at = posted
                worker = await asyncio.to_thread(start_worker, settings, LOGS)

            semaphore = asyncio.Semaphore(IN_FLIGHT)

            async def bounded(subject: str) -> None:
                async with semaphore:
                    await post_subject(subject)

            started = time.monotonic()
            await asyncio.gather(chaos(), *(bounded(f"player-{i:03d}") for i in range(SUBJECTS)))
            print(
                f"\nposted {posted} exchanges in {time.monotonic() - started:.1f}s; "
                f"worker killed after {killed_at}, restarted after {restarted_at}"
            )

            deadline = time.monotonic() + 300
            for subject, position in sorted(last_position.items()):
                while True:
                    response = await http.get(
                        f"/v1/tenants/crash/subjects/{subject}/context", params={"after": position}
                    )
                    if response.status_code == 200 or time.monotonic() > deadline:
                        break
                assert response.status_code == 200, response.text
                questions = [e["question"] for e in response.json()["exchanges"]]
                assert questions == [f"{subject} q{n}" for n in range(PER_SUBJECT)], subject
                archived = await archived_questions(http, "crash", subject, position)
                assert archived == [f"{subject} q{n}" for n in range(PER_SUBJECT)], subject
            print(
                f"all {SUBJECTS * PER_SUBJECT} exchanges read back exactly once, in order, from sessions and archive "
                f"{time.monotonic() - started:.1f}s after the first post"
            )
    finally:
        api.stop()
        worker.stop()
    assert killed_at > 0 and restarted_at > killed_at
    assert "Worker]: Ready" in worker.output()
