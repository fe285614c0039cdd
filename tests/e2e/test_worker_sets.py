"""Workers that each run a set of the projections (MEMLOG_WORKER_PROJECTIONS), each in a consumer
group of its own: the projections a context read waits for (sessions, and the facts' activity) keep
it current while the worker that archives is down, and that worker, started again, archives what it
missed exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import MemlogProcess, start_api, start_worker
from streams.topics import ensure_topics
from tests.e2e.conftest import LOGS, api_client, own_settings
from tests.e2e.reads import archived_questions, until_ok

TENANT = "sets"
CONTEXT = "sessions,facts"  # what a context read after a threads position waits for (memlog/app/positions.py)
STORES = "archives,traces,privacy"


@pytest.fixture
def split(stack: Settings) -> Iterator[tuple[Settings, list[MemlogProcess]]]:
    settings = own_settings(stack)
    asyncio.run(ensure_topics(settings))
    processes = [
        start_worker(settings.model_copy(update={"worker_projections": CONTEXT}), LOGS),
        start_worker(settings.model_copy(update={"worker_projections": STORES}), LOGS),
        start_api(settings, LOGS),
    ]
    yield settings, processes
    for process in processes:
        process.stop()


async def post(http: httpx.AsyncClient, **payload: Any) -> str:
    response = await http.post("/v1/exchanges", json={"tenant": TENANT, "subject": "ada", **payload})
    assert response.status_code == 202, response.text
    position: str = response.json()["position"]
    return position


async def questions_in_context(http: httpx.AsyncClient, after: str) -> list[str]:
    response = await until_ok(http, f"/v1/tenants/{TENANT}/subjects/ada/context", {"after": after})
    assert response.status_code == 200, response.text
    return [exchange["question"] for exchange in response.json()["exchanges"]]


async def test_the_context_stays_current_while_the_archiving_worker_is_down(
    split: tuple[Settings, list[MemlogProcess]],
) -> None:
    settings, (context, stores, _api) = split
    assert f"consumer group {settings.group_id}.sessions.facts" in context.output()
    assert f"consumer group {settings.group_id}.archives.traces.privacy" in stores.output()
    async with api_client(settings) as http:
        first = await post(http, question="one?", answer="1")
        assert await questions_in_context(http, first) == ["one?"]
        assert await archived_questions(http, TENANT, "ada", first) == ["one?"]

        stores.kill()  # no archive, traces or privacy worker from here
        second = await post(http, question="two?", tool_calls=[{"name": "t", "result": 2}], answer="2")
        assert await questions_in_context(http, second) == ["one?", "two?"]
        export = f"/v1/tenants/{TENANT}/threads/session:ada/conversations/main/export"
        unarchived = await http.get(export)
        assert unarchived.status_code == 200, unarchived.text
        assert [e["text"] for e in unarchived.json()["entries"] if e["entry_id"].endswith(".q")] == ["one?"]

        again = start_worker(settings.model_copy(update={"worker_projections": STORES}), LOGS)
        try:
            assert await archived_questions(http, TENANT, "ada", second) == ["one?", "two?"]
            assert await questions_in_context(http, second) == ["one?", "two?"]
        finally:
            again.stop()
