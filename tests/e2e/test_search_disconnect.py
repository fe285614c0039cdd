"""A client that leaves has its search stopped (issue 41: "the MongoDB server kept a core busy after the
client had gone"). The API cancels the request's work when its client disconnects (memlog/api/gone.py),
and the driver drops the connection the read was running on. SecantusDB's `currentOp` lists one record
per client connection (it has no per-operation records and finishes a running command before it sees
the close), so "the operation is gone" is read as: the API's connection that carried the search's read
leaves `currentOp`, while a search whose client waits for its answer leaves its connections in the pool.

The archive is loaded directly (300 exchanges of 22 KB holding one common word, their groups padded as
a 22 KB exchange's terms would weigh), so the thread search's read of the common word runs on the server
for a second or more (bounded by MEMLOG_SEARCH_MAX_TIME_MS). The time from the
disconnect until the connection is gone is printed; bench/search_bounds.py measures it.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from pymongo import AsyncMongoClient

from memlog.adapters.mongo_entries import GROUPS
from memlog.config.settings import Settings
from memlog.dev.processes import MemlogProcess, free_port, start_api
from memlog.services import open_services
from projections.archives import ConversationRef, Entry, index_terms
from tests.conftest import unique_settings
from tests.e2e.conftest import LOGS

TENANT = "leaving-x"
BACKEND = {"Authorization": "Bearer tok-leaving"}
EXCHANGES = 300
BYTES = 22 * 1024
WORDS = ["lantern", "harbour", "copper", "meadow", "saddle", "tower", "quill", "ember", "thistle", "orchard"]
# SecantusDB's cost of reading a group grows with the elements of its arrays (a 22 KB exchange holds about
# 1,000 distinct terms), not with its bytes; a padding array nobody indexes gives the groups that cost
# without the minutes its index keys would take to write
PAD = 3000
T0 = 1_795_000_000_000


def with_app_name(url: str, name: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}appName={name}"


@pytest.fixture(scope="module")
def leaving(stack: Settings) -> Iterator[tuple[Settings, str]]:
    app = f"memlog-leaving-{uuid.uuid4().hex[:8]}"  # the API's connections, told apart in currentOp
    settings = unique_settings(
        stack, api_port=free_port(), backend_tokens={"tok-leaving": TENANT}, mongo_url=with_app_name(stack.mongo, app)
    )
    asyncio.run(load(settings))
    process: MemlogProcess = start_api(settings, LOGS)
    yield settings, app
    process.stop()


def entry(rng: random.Random, n: int) -> Entry:
    text = " ".join(rng.choice(WORDS) for _ in range(BYTES // 7))
    return Entry(
        ref=ConversationRef(TENANT, "session", "keeper", "main"),
        entry_id=f"x{n}.a",
        store_id=f"threads:0:{n}",
        seq=n,
        exchange_id=f"x{n}",
        role="answer",
        occurred_at=T0 + n,
        text=text,
        original=None,
        subject="keeper",
        agent="bounds",
        terms=index_terms(text),
    )


async def load(settings: Settings) -> None:
    rng = random.Random(41)
    async with open_services(settings) as services:
        await services.current.prepare()
        for start in range(0, EXCHANGES, 50):
            await services.conversations.insert_entries([entry(rng, n) for n in range(start, start + 50)])
        await services.database[GROUPS].update_many({"tenant": TENANT}, {"$set": {"pad": list(range(PAD))}})


@pytest.fixture
async def mongo(leaving: tuple[Settings, str]) -> AsyncIterator[AsyncMongoClient[dict[str, Any]]]:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(leaving[0].mongo.split("appName=")[0].rstrip("&?"))
    yield client
    await client.close()


async def api_connections(mongo: AsyncMongoClient[dict[str, Any]], app: str) -> dict[int, str]:
    """The API's connections SecantusDB lists, with the last command each ran."""
    ops = (await mongo.admin.command("currentOp", {"$all": True}))["inprog"]
    return {
        int(op["connectionId"]): str(op.get("op"))
        for op in ops
        if op.get("type") == "op" and (op.get("clientMetadata") or {}).get("application", {}).get("name") == app
    }


def search(http: httpx.AsyncClient, q: str) -> Any:
    """The thread's search: an agent's reads a common word's postings only (bounded), and is over too soon."""
    return http.get(
        f"/v1/tenants/{TENANT}/threads/session:keeper/search",
        params={"q": q, "neighbours": 0, "scope": "history"},
        headers=BACKEND,
    )


async def test_a_search_whose_client_leaves_gives_up_its_connection(
    leaving: tuple[Settings, str], mongo: AsyncMongoClient[dict[str, Any]]
) -> None:
    settings, app = leaving
    url = f"http://127.0.0.1:{settings.api_port}"
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        waited = await search(http, "zephyrine")  # a client that waits for its answer
        assert waited.status_code == 200, waited.text
        kept = await api_connections(mongo, app)
        assert kept, "the API's connections are listed in currentOp by their application name"
        await asyncio.sleep(0.5)
        assert set(kept) <= set(await api_connections(mongo, app)), "a finished search keeps its pooled connections"

    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        request = asyncio.ensure_future(search(http, "lantern"))
        await asyncio.sleep(0.4)  # the read is running on the server (it takes a second or more)
        running = await api_connections(mongo, app)
        assert not request.done(), "the search was still running when its client left"
        request.cancel()
        await asyncio.gather(request, return_exceptions=True)
    left = time.monotonic()
    gone: set[int] = set()
    while time.monotonic() - left < 15 and not gone:  # a bound on the wait, not a timing check
        await asyncio.sleep(0.05)
        gone = set(running) - set(await api_connections(mongo, app))
    print(f"\nconnection(s) {sorted(gone)} left currentOp {time.monotonic() - left:.2f} s after the client")
    assert gone, f"the search's connection is still listed after its client left: {running}"
    assert {running[c] for c in gone} <= {"find", "getMore", "aggregate", "count"}, running
