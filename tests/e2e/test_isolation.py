"""Issue 41, isolation of work: one costly record of one tenant does not stop another tenant's reads.

A streamed exchange whose tool call carries 10,000, then 28,000 distinct words (a file list, a page
of ids) is archived within the bound DESIGN states ("Isolation of work"), while another tenant writes
every half second and reads each write back with `after=` within the API's usual read wait, and the
worker (every projection in one process, the hardest case) never exits.
"""

from __future__ import annotations

import asyncio
import random
import string
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import MemlogProcess, start_worker
from streams.topics import ensure_topics
from tests.e2e.conftest import LOGS, api_client, memlog, own_settings

# DESIGN ("Isolation of work") promises 10 s, measured and printed here (1.2 to 5.0 s at load 9). The
# suite asserts a bound six times as loose, so a busy shared machine does not fail it while the failure
# it guards against (a worker stalled for minutes, then stopped by its watchdog) still does.
ARCHIVED_WITHIN_SECONDS = 60.0
READ_WAIT_SECONDS = 15.0  # the neighbour's read with after=: 5 s by default, looser here for the same reason


@pytest.fixture
def running(stack: Settings) -> Iterator[tuple[Settings, MemlogProcess]]:
    settings = own_settings(stack, read_wait_seconds=READ_WAIT_SECONDS)
    asyncio.run(ensure_topics(settings))
    worker = start_worker(settings, LOGS)  # by hand: the test stops it
    with memlog(settings, worker=False):
        yield settings, worker
    worker.stop()


def distinct_words(count: int, seed: int) -> list[str]:
    pick = random.Random(seed)
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(pick.choices(string.ascii_lowercase, k=9)))
    return sorted(words)


async def posted(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> str:
    response = await http.post(url, json=body)
    assert response.status_code == 202, response.text[:500]
    position: str = response.json()["position"]
    return position


async def neighbour(http: httpx.AsyncClient, stop: asyncio.Event, statuses: list[int]) -> None:
    """Another tenant: a write every half second, each read back with after= (one try, no retry)."""
    n = 0
    while not stop.is_set():
        n += 1
        position = await posted(http, "/v1/exchanges", {"tenant": "calm", "subject": "bo", "question": f"q{n}?"})
        response = await http.get("/v1/tenants/calm/subjects/bo/context", params={"after": position})
        statuses.append(response.status_code)
        await asyncio.sleep(0.5)


async def archived(http: httpx.AsyncClient, subject: str, after: str) -> dict[str, Any]:
    export = f"/v1/tenants/loud/threads/session:{subject}/conversations/main/export"
    while True:
        response = await http.get(export, params={"after": after})
        if response.status_code != 503:
            assert response.status_code == 200, response.text[:500]
            page: dict[str, Any] = response.json()
            return page


async def streamed(http: httpx.AsyncClient, subject: str, words: list[str]) -> tuple[float, dict[str, Any]]:
    """A streamed exchange with one tool call of `words`: seconds from the call's post to its archiving."""
    route = {"tenant": "loud", "subject": subject}
    base = f"/v1/exchanges/x{uuid.uuid4().hex[:12]}"
    await posted(http, base + "/question", {**route, "question": "list every file"})
    started = time.monotonic()
    call = {**route, "call_index": 0, "name": "ls", "arguments": {}, "result": " ".join(words)}
    await posted(http, base + "/tool-calls", call)
    last = await posted(http, base + "/answer", {**route, "answer": "those are all the files"})
    page = await archived(http, subject, last)
    return time.monotonic() - started, page


@pytest.mark.parametrize("count", [10_000, 28_000])
async def test_a_streamed_call_of_many_words_is_archived_while_another_tenant_reads_on(
    running: tuple[Settings, MemlogProcess], count: int
) -> None:
    settings, worker = running
    words = distinct_words(count, count)
    subject = f"s{uuid.uuid4().hex[:8]}"
    statuses: list[int] = []
    stop = asyncio.Event()
    async with api_client(settings) as http:
        calm = asyncio.create_task(neighbour(http, stop, statuses))
        try:
            seconds, page = await streamed(http, subject, words)
            await asyncio.sleep(2)  # the neighbour goes on after it, too
        finally:
            stop.set()
            await calm
        search = await http.get(f"/v1/tenants/loud/threads/session:{subject}/search", params={"q": words[-1]})
    print(f"{count} distinct words archived {seconds:.1f}s after the call's post; neighbour reads {statuses}")
    roles = [entry["role"] for entry in page["entries"]]
    assert roles == ["question", "tool", "answer"]
    tool = page["entries"][1]
    assert words[-1] in tool["text"] and "terms_cut" not in tool  # indexed whole
    assert seconds <= ARCHIVED_WITHIN_SECONDS
    assert statuses and set(statuses) == {200}  # every neighbour read within the API's usual wait
    assert worker.process.poll() is None
    assert "restarting the consumer" not in worker.output() and "exiting with code" not in worker.output()
    assert search.status_code == 200, search.text[:500]
    assert [hit["role"] for hit in search.json()["results"]] == ["tool"]  # its last word found by the index
