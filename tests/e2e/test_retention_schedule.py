"""Retention runs by itself in the worker (MEMLOG_RETENTION_CHECK_SECONDS), with seed 004's guards: a task
conversation goes once finished and old enough, never main, a running or an unfinished one; each purge is
ledgered."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from tests.e2e.conftest import memlog, own_settings

TENANT = "keep-tidy"
DAY = 86_400_000
DEADLINE_SECONDS = 120


@pytest.fixture(scope="module")
def live(stack: Settings) -> Iterator[Settings]:
    settings = own_settings(stack, retention_enabled=True, retention_check_seconds=1.0)
    with memlog(settings):
        yield settings


def thread(subject: str) -> str:
    return f"/v1/tenants/{TENANT}/threads/session:{subject}"


async def said(http: httpx.AsyncClient, subject: str, conversation: str, at: int, answer: str | None = "a") -> str:
    body: dict[str, Any] = {"tenant": TENANT, "subject": subject, "question": "q", "occurred_at": at}
    body |= {"conversation": conversation} if conversation != "main" else {}
    body |= {"answer": answer} if answer is not None else {}
    response = await http.post("/v1/exchanges", json=body)
    assert response.status_code == 202, response.text
    position: str = response.json()["position"]
    return position


async def listed(http: httpx.AsyncClient, subject: str, after: str | None = None) -> set[str]:
    response = await http.get(f"{thread(subject)}/conversations", params={"after": after} if after else {})
    assert response.status_code == 200, response.text
    return {c["conversation"] for c in response.json()["conversations"]}


async def test_the_worker_purges_a_finished_old_task_by_itself_and_spares_the_rest(http: httpx.AsyncClient) -> None:
    old = int(time.time() * 1000) - 40 * DAY
    s = "tidy-ann"
    await said(http, s, "main", old)
    await said(http, s, "done", old)
    await said(http, s, "unfinished", old)
    last = await said(http, s, "waiting", old, answer=None)
    marked = await http.post(f"{thread(s)}/conversations/done/archive", params={"after": last}, json={"archived": True})
    assert marked.status_code == 202, marked.text
    # marked finished: purged by the worker's schedule, with no command typed
    deadline = time.monotonic() + DEADLINE_SECONDS
    while "done" in await listed(http, s, marked.json()["position"]) and time.monotonic() < deadline:
        await asyncio.sleep(1)
    assert await listed(http, s) == {"main", "unfinished", "waiting"}
    ledger = await http.get(f"/v1/tenants/{TENANT}/ledger")
    assert ledger.status_code == 200, ledger.text
    entries = [e for e in ledger.json() if e.get("kind") == "retention" and e.get("conversation") == "done"]
    assert entries and entries[0]["by"] == "schedule" and "subject" not in entries[0]


async def test_a_retention_purge_of_main_or_an_unfinished_task_is_refused(http: httpx.AsyncClient) -> None:
    s = "tidy-bea"
    last = await said(http, s, "main", int(time.time() * 1000))
    last = await said(http, s, "open-task", int(time.time() * 1000))
    await listed(http, s, last)
    for conversation in ("main", "open-task"):
        refused = await http.post(f"{thread(s)}/conversations/{conversation}/purge", json={"reason": "retention"})
        assert refused.status_code == 422, refused.text
        assert "retention" in refused.text
    assert await listed(http, s) == {"main", "open-task"}
