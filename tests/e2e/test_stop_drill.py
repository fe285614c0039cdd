"""Workers stopped (SIGTERM, SIGKILL) and rebalanced while exchanges are recorded and one projection
is slow: every projection's store (sessions, archive, facts, fact activity, traces, privacy) holds
every event exactly once.

Faust commits one offset per partition for every projection of a topic; before projections resumed
from their own checkpoints, a stop mid-batch left the slowest one (the archive, here made slow on
purpose) behind for good.
"""

from __future__ import annotations

import asyncio

import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import MemlogProcess, free_port, start_api, start_worker
from memlog.services import open_services
from schemas.events import now_ms
from streams.topics import ensure_topics
from tests.conftest import unique_settings
from tests.e2e.conftest import LOGS, api_client
from tests.e2e.reads import archived_questions, until_ok

TENANT = "drill"
SUBJECTS = 6
PER_SUBJECT = 80
PACE_SECONDS = 0.5  # between one subject's exchanges: recording spans every stop and restart below


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_every_projection_holds_every_event_once_across_stops_kills_and_a_rebalance(stack: Settings) -> None:
    settings = unique_settings(stack, api_port=free_port(), drill_step_delays={"archive": 0.2})
    await ensure_topics(settings)
    workers: list[MemlogProcess] = [start_worker(settings, LOGS)]
    api = start_api(settings, LOGS)
    last: dict[str, str] = {}
    runs: dict[str, str] = {}
    erasure: list[str] = []
    posted = 0
    chaos_log: list[str] = []
    try:
        async with api_client(settings) as http:

            async def record(subject: str) -> None:
                nonlocal posted
                for n in range(PER_SUBJECT):
                    body = {
                        "tenant": TENANT,
                        "subject": subject,
                        "question": f"{subject} q{n}",
                        "tool_calls": [{"name": "count", "arguments": {"n": n}, "result": n}],
                        "answer": f"a{n}",
                    }
                    response = await http.post("/v1/exchanges", json=body)
                    assert response.status_code == 202, response.text
                    last[subject] = response.json()["position"]
                    posted += 1
                    await asyncio.sleep(PACE_SECONDS)
                    if n == PER_SUBJECT // 2:
                        fact = await http.post(
                            f"/v1/tenants/{TENANT}/subjects/{subject}/facts", json={"text": f"{subject} likes {n}"}
                        )
                        assert fact.status_code == 202, fact.text
                        run = await http.post(
                            "/v1/runs",
                            json={
                                "tenant": TENANT,
                                "subject": subject,
                                "agent": "helper",
                                "run_id": f"run-{subject}",
                                "status": "ok",
                                "started_at": now_ms() - 1000,
                                "ended_at": now_ms(),
                            },
                        )
                        assert run.status_code == 202, run.text
                        runs[subject] = run.json()["position"]

            async def at(count: int) -> None:
                while posted < count:
                    await asyncio.sleep(0.02)

            async def chaos() -> None:
                total = SUBJECTS * PER_SUBJECT
                await at(total // 8)
                workers[0].stop()  # SIGTERM
                chaos_log.append(f"SIGTERM at {posted}")
                workers[0] = await asyncio.to_thread(start_worker, settings, LOGS)
                await at(total // 4)
                workers[0].kill()  # SIGKILL: no clean shutdown, no final commit
                chaos_log.append(f"SIGKILL at {posted}")
                workers[0] = await asyncio.to_thread(start_worker, settings, LOGS)
                await at(total * 3 // 8)
                workers.append(await asyncio.to_thread(start_worker, settings, LOGS))  # a rebalance: two workers
                chaos_log.append(f"second worker at {posted}")
                await at(total // 2)
                workers[0].stop()  # and back to one
                chaos_log.append(f"first worker stopped at {posted}")

            for n in range(3):  # a subject erased while the workers are stopped and started
                gone = await http.post(
                    "/v1/exchanges", json={"tenant": TENANT, "subject": "gone", "question": f"gone {n}", "answer": "a"}
                )
                assert gone.status_code == 202, gone.text

            async def erase_midway() -> None:
                await at(SUBJECTS * PER_SUBJECT // 5)
                erased = await http.post(f"/v1/tenants/{TENANT}/subjects/gone/erase", json={"reason": "drill"})
                assert erased.status_code == 200, erased.text
                erasure.append(erased.json()["request_id"])

            subjects = [f"p{i}" for i in range(SUBJECTS)]
            await asyncio.gather(chaos(), erase_midway(), *(record(s) for s in subjects))
            assert len(chaos_log) == 4 and all(f"at {posted}" not in step for step in chaos_log), chaos_log

            for subject in subjects:
                expected = [f"{subject} q{n}" for n in range(PER_SUBJECT)]
                context = await until_ok(
                    http, f"/v1/tenants/{TENANT}/subjects/{subject}/context", {"after": last[subject]}
                )
                assert context.status_code == 200, context.text
                assert [e["question"] for e in context.json()["exchanges"]] == expected, subject
                assert await archived_questions(http, TENANT, subject, last[subject]) == expected, subject
                facts = await http.get(f"/v1/tenants/{TENANT}/subjects/{subject}/facts")
                assert [f["text"] for f in facts.json()["facts"]] == [f"{subject} likes {PER_SUBJECT // 2}"]
                shape = await until_ok(http, f"/v1/tenants/{TENANT}/runs/run-{subject}", {"after": runs[subject]})
                assert shape.status_code == 200, shape.text
            # fact activity: each subject's facts are kept from its last question on
            async with open_services(settings) as services:
                for subject in subjects:
                    context = (await http.get(f"/v1/tenants/{TENANT}/subjects/{subject}/context")).json()
                    state = await services.facts.load(TENANT, subject)
                    assert state is not None
                    assert state.last_question_at == max(e["occurred_at"] for e in context["exchanges"]), subject
            # privacy: the erasure applied once, and an export made after everything holds it all
            gone = await until_ok(http, f"/v1/tenants/{TENANT}/subjects/gone/context", {})
            assert gone.json()["exchanges"] == []
            ledger = (await http.get(f"/v1/tenants/{TENANT}/ledger", params={"subject": "gone"})).json()
            # the ledger (shared by every run on this stack) holds this erasure once
            assert [e["kind"] for e in ledger if e["id"] == erasure[0]] == ["erased"], ledger
            exported = await http.post(f"/v1/tenants/{TENANT}/subjects/p0/export")
            assert exported.status_code == 200, exported.text
            bundle = exported.json()
            assert len(bundle["session"]["exchanges"]) == PER_SUBJECT and len(bundle["facts"]) == 1
            ready = await until_ok(http, "/readyz", {})
            assert ready.status_code == 200, ready.text
            print(f"\n{posted} exchanges; {'; '.join(chaos_log)}; every projection read back exactly once")
    finally:
        api.stop()
        for worker in workers:
            worker.stop()
