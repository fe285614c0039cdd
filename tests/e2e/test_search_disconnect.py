"""A client that leaves has its search stopped (issue 41: "the MongoDB server kept a core busy after the
client had gone"). The API cancels the request's work when its client disconnects (memlog/api/gone.py),
and the driver drops the connection the read was running on. SecantusDB's `currentOp` lists one record
per client connection (it has no per-operation records and finishes a running command before it sees
the close), so "the operation is gone" is read as: the API's connection that carried the search's read
leaves `currentOp`, while a search whose client waits for its answer leaves its connections in the pool.

The archive is loaded directly: 300 exchanges of 22 KB holding one common word, their groups padded as
a 22 KB exchange's terms would weigh, and each holding 20 of 400 rarer words. The worst search is one of
40 rarer words: it reads most of the thread (a common word's read is cut by postings). Its reads are
short commands (memlog/adapters/mongo_bounded.py), so the connection is gone soon after the client,
before the search would have ended; the times are printed (bench/search_bounds.py measures them).
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
from tests.e2e.conftest import LOGS, api_client

TENANT = "leaving-x"
BACKEND = {"Authorization": "Bearer tok-leaving"}
EXCHANGES = 300
BYTES = 22 * 1024
RARER = [f"zy{a}{b}{c}q" for a in "bdfghkmp" for b in "aeiou" for c in "lmnprstvwx"]
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
    rarer = RARER[n % 20 :: 20]  # 20 of them, each held by 15 exchanges
    text = " ".join([*(rng.choice(WORDS) for _ in range(BYTES // 7)), *rarer])
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
    """The thread's search (an agent's reads the same way: memlog/adapters/mongo_bounded.py)."""
    return http.get(
        f"/v1/tenants/{TENANT}/threads/session:keeper/search",
        params={"q": q, "neighbours": 0, "scope": "history"},
        headers=BACKEND,
    )


async def test_a_common_word_of_the_thread_is_cut_and_marked_partial(leaving: tuple[Settings, str]) -> None:
    async with api_client(leaving[0]) as http:
        common = await search(http, "lantern")
        rare = await search(http, RARER[0])
    assert common.status_code == rare.status_code == 200, common.text
    assert common.json()["partial"] is True and len(common.json()["results"]) == 20
    assert rare.json()["partial"] is False and len(rare.json()["results"]) == 15


async def leave(
    settings: Settings, q: str, mongo: AsyncMongoClient[dict[str, Any]], app: str, after: float
) -> tuple[set[int], dict[int, str], float]:
    """Close a search's client `after` seconds in: the API's connections gone within 5 s after, those
    open then, and the seconds from the search's start until they were gone."""
    async with api_client(settings) as http:
        started = time.monotonic()
        request = asyncio.ensure_future(search(http, q))
        await asyncio.sleep(after)  # the search is reading, command after command
        running = await api_connections(mongo, app)
        assert not request.done(), "the search was still running when its client left"
        request.cancel()
        await asyncio.gather(request, return_exceptions=True)
    left = time.monotonic()
    gone: set[int] = set()
    while time.monotonic() - left < 5 and not gone:  # a bound on the wait, not a timing check
        await asyncio.sleep(0.02)
        gone = set(running) - set(await api_connections(mongo, app))
    print(f"\nconnection(s) {sorted(gone)} left currentOp {time.monotonic() - left:.2f} s after the client")
    return gone, running, time.monotonic() - started


async def test_a_search_whose_client_leaves_gives_up_its_connection(
    leaving: tuple[Settings, str], mongo: AsyncMongoClient[dict[str, Any]]
) -> None:
    settings, app = leaving
    q = " ".join(RARER[:40])  # most of the thread's exchanges hold one of them: the longest search
    async with api_client(settings) as http:
        started = time.monotonic()
        waited = await search(http, q)  # a client that waits for its answer
        whole = time.monotonic() - started
        assert waited.status_code == 200, waited.text
        kept = await api_connections(mongo, app)
        assert kept, "the API's connections are listed in currentOp by their application name"
        await asyncio.sleep(0.5)
        assert set(kept) <= set(await api_connections(mongo, app)), "a finished search keeps its pooled connections"
    print(f"\nthe whole search took {whole:.2f} s")
    # the task is cancelled at the await it is in: nearly always a command's reply (its connection is
    # closed), rarely between two commands (the connection goes back to the pool, and nothing is left
    # to stop): a client leaves again then, at another moment (a loaded machine moves the reads)
    for after in (0.5, 0.3, 0.8, 0.4, 0.6, 1.0):
        gone, running, took = await leave(settings, q, mongo, app, after)
        if gone:
            break
    assert gone, f"the search's connection is still listed after its client left: {running}"
    assert {running[c] for c in gone} <= {"find", "getMore", "aggregate", "count"}, running
    assert took < whole, "the search's reads stopped before the search would have ended"
