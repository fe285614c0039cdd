"""Bounded search (issue 41) through the HTTP API: what a common word, no word, 1,000 terms and a client
that leaves cost, on an agent with 1,200 exchanges of 22 KB.

Loads the exchanges (one subject's session, agent `bounds`; every exchange holds the common word
`lantern`, two hold the rare word `zephyrine`), then measures, interleaved round by round, the agent's
search and the thread's search for the rare word, the common word, `q=ü` and a query with no word,
with `/healthz` polled every 10 ms meanwhile (its slowest answer per query; the first search of each
route, when FastAPI builds the route's state, is reported apart); then the refusals (1,000
terms, empty q), and a client that closes its connection 200 ms into a thread search for 40 of the
vocabulary's words (the longest search: each word's best exchanges, hundreds of groups, read a slice
a command): the time until a SecantusDB connection of the API (told apart by its `appName`) leaves
`currentOp` (SecantusDB cannot stop a running command: its connection closes when the command in
flight ends; memlog/adapters/mongo_bounded.py keeps each one short).

    python -m bench.search_bounds [--candidates N] [--out r.json]   # starts API and worker on the local stack
    MEMLOG_BENCH_BOUNDS_EXCHANGES=300 python -m bench.search_bounds  # smaller
    MEMLOG_BENCH_BOUNDS_TENANT=bounds-1a2b3c MEMLOG_BENCH_BOUNDS_NAMESPACE=t0123456789 python -m bench.search_bounds
        # measure again a tenant loaded before, in its run's namespace (its `memlogtest_<namespace>` database)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from pymongo import AsyncMongoClient

LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"
EXCHANGES = int(os.environ.get("MEMLOG_BENCH_BOUNDS_EXCHANGES", "1200"))
WAIT = int(os.environ.get("MEMLOG_BENCH_BOUNDS_WAIT", "2700"))  # 1,200 exchanges take about 20 min to archive here
BYTES = 22 * 1024
VOCABULARY = 3000  # distinct words the texts draw from, Zipf-like: a 22 KB text holds about 1,000 of them
ROUNDS = 7
SYLLABLES = [a + b for a in "bdfgklmnprstvz" for b in ("a", "e", "i", "o", "u", "ar", "en", "il", "on", "us")]


def vocabulary(rng: random.Random) -> list[str]:
    return sorted({"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(VOCABULARY)})


MANY = " ".join(vocabulary(random.Random(7))[:40])  # the disconnect's query: the load's first 40 words


def text(rng: random.Random, words_of: list[str], rare: bool) -> str:
    words = ["lantern"] + (["zephyrine"] if rare else [])
    weights = [1.0 / (rank + 1) for rank in range(len(words_of))]
    while sum(len(w) + 1 for w in words) < BYTES:
        words += rng.choices(words_of, weights, k=200)
    rng.shuffle(words)
    return " ".join(words)


async def timed(call: Callable[[], Awaitable[httpx.Response]]) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = await call()
    return time.perf_counter() - started, response


async def load(http: httpx.AsyncClient, tenant: str, supervise: Callable[[], None]) -> None:
    rng = random.Random(7)
    words_of = vocabulary(rng)
    bodies = [
        {
            "tenant": tenant,
            "subject": "keeper",
            "agent": "bounds",
            "exchange_id": f"b{n}",
            "question": f"what did the ledger say on day {n}?",
            "answer": text(rng, words_of, n in (EXCHANGES // 4, 3 * EXCHANGES // 4)),
        }
        for n in range(EXCHANGES)
    ]
    gate = asyncio.Semaphore(6)

    async def post(body: dict[str, Any]) -> None:
        async with gate:
            response = await http.post("/v1/exchanges", json=body)
            response.raise_for_status()

    await asyncio.gather(*(post(b) for b in bodies))
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:  # until the archive holds the last exchanges (each question names its day)
        supervise()
        found = await http.get(
            f"/v1/tenants/{tenant}/threads/session:keeper/search",
            params={"q": " ".join(str(n) for n in range(EXCHANGES - 6, EXCHANGES)), "neighbours": 0},
        )
        if found.status_code == 200 and len(found.json()["results"]) == 6:
            return
        await asyncio.sleep(2)
    raise TimeoutError(f"the archive did not apply the exchanges in {WAIT} s (MEMLOG_BENCH_BOUNDS_WAIT)")


async def with_health(http: httpx.AsyncClient, work: Awaitable[Any]) -> tuple[Any, float]:
    """The work's result and the slowest /healthz answer while it ran."""
    slowest = 0.0
    task = asyncio.ensure_future(work)
    while not task.done():
        took, _ = await timed(lambda: http.get("/healthz"))
        slowest = max(slowest, took)
        await asyncio.sleep(0.01)
    return task.result(), slowest


async def disconnect(url: str, tenant: str, mongo: str, app: str) -> dict[str, Any]:
    """Close a client 200 ms into a search of many words; how long until a connection of the API (its
    `appName`) that was open then leaves currentOp (tests/e2e/test_search_disconnect.py checks it)."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo)

    async def api_connections() -> set[int]:
        ops = (await client.admin.command("currentOp", {"$all": True}))["inprog"]
        return {
            int(op["connectionId"])
            for op in ops
            if op.get("type") == "op" and (op.get("clientMetadata") or {}).get("application", {}).get("name") == app
        }

    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        request = asyncio.ensure_future(
            http.get(f"/v1/tenants/{tenant}/threads/session:keeper/search", params={"q": MANY, "neighbours": 0})
        )
        await asyncio.sleep(0.2)
        running = await api_connections()
        finished = request.done()
        request.cancel()
        await asyncio.gather(request, return_exceptions=True)
    closed = time.perf_counter()
    gone_after = None
    while time.perf_counter() - closed < 10:
        if running - await api_connections():
            gone_after = round(time.perf_counter() - closed, 2)
            break
        await asyncio.sleep(0.02)
    await client.close()
    return {"api_connections": len(running), "finished_before_close": finished, "gone_after_s": gone_after}


def p50(samples: Sequence[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


async def measure(url: str, tenant: str, mongo: str, app: str, supervise: Callable[[], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        started = time.perf_counter()
        if not os.environ.get("MEMLOG_BENCH_BOUNDS_TENANT"):
            await load(http, tenant, supervise)
        out["tenant"], out["load_s"] = tenant, round(time.perf_counter() - started, 1)
        routes = {
            "agent": f"/v1/tenants/{tenant}/agents/bounds/search",
            "thread": f"/v1/tenants/{tenant}/threads/session:keeper/search",
        }
        queries = {"rare": "zephyrine", "common": "lantern", "u-umlaut": "ü", "no word": "?!"}
        times: dict[str, list[float]] = {f"{r} {q}": [] for r in routes for q in queries}
        health: dict[str, list[float]] = {k: [] for k in times}
        partial: dict[str, Any] = {}
        statuses: dict[str, list[int]] = {}  # a read past MEMLOG_SEARCH_MAX_TIME_MS answers 503
        out["load_average_before"] = [round(x, 2) for x in os.getloadavg()]
        first: dict[str, float] = {}  # the first search of each route: FastAPI builds its route's state then, once
        for route, path in routes.items():
            call = http.get(path, params={"q": "zephyrine", "scope": "history", "neighbours": 0, "limit": 10})
            (_, _), slowest = await with_health(http, timed(lambda c=call: c))
            first[route] = round(slowest * 1000, 1)
        out["first_search_healthz_max_ms"] = first
        for _ in range(ROUNDS):
            for route, path in routes.items():
                for name, q in queries.items():
                    call = http.get(path, params={"q": q, "scope": "history", "neighbours": 0, "limit": 10})
                    (took, response), slowest = await with_health(http, timed(lambda c=call: c))
                    statuses.setdefault(f"{route} {name}", []).append(response.status_code)
                    times[f"{route} {name}"].append(took)
                    health[f"{route} {name}"].append(slowest)
                    partial[f"{route} {name}"] = response.json().get("partial") if response.is_success else None
        out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        out["p50_ms"] = {k: p50(v) for k, v in times.items()}
        out["common_over_rare"] = {
            route: round(statistics.median(times[f"{route} common"]) / statistics.median(times[f"{route} rare"]), 1)
            for route in routes
        }
        out["partial"] = partial
        out["statuses"] = {k: sorted(set(v)) for k, v in statuses.items()}
        out["healthz_max_ms"] = {k: round(max(v) * 1000, 1) for k, v in health.items()}
        many = " ".join(f"t{n}" for n in range(1000))
        refused = await http.get(routes["agent"], params={"q": many})
        out["1000_terms"] = [refused.status_code, refused.json()["detail"][0]["loc"][-1]]
        out["empty_q"] = (await http.get(routes["thread"], params={"q": " "})).status_code
    out["disconnect"] = await disconnect(url, tenant, mongo.split("appName=", maxsplit=1)[0].rstrip("&?"), app)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=None, help="MEMLOG_SEARCH_MAX_CANDIDATES for the API")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    from bench.projection import on_local_stack
    from memlog.config.settings import Settings
    from memlog.dev.processes import start_api, start_worker
    from streams.topics import ensure_topics

    holder: dict[str, Any] = {}

    async def run(settings: Settings) -> None:
        update: dict[str, Any] = {"embeddings": "none", "backend_tokens": {}, "operator_tokens": []}
        app = f"memlog-bench-bounds-{uuid.uuid4().hex[:6]}"  # the API's connections, told apart in currentOp
        mongo = settings.mongo
        update |= {"credentials_file": None, "api_host": "127.0.0.1"}
        update["mongo_url"] = f"{mongo}{'&' if '?' in mongo else '?'}appName={app}"
        if args.candidates is not None:
            update["search_max_candidates"] = args.candidates
        if os.environ.get("MEMLOG_BENCH_BOUNDS_NAMESPACE"):
            update["namespace"] = os.environ["MEMLOG_BENCH_BOUNDS_NAMESPACE"]
        settings = settings.model_copy(update=update)
        await ensure_topics(settings)
        workers = [await asyncio.to_thread(start_worker, settings, LOGS)]
        api = await asyncio.to_thread(start_api, settings, LOGS)

        def supervise() -> None:  # as `memlog up` does: a worker whose watchdog gave up (exit 75) starts again
            if workers[-1].process.poll() is not None:
                print(f"the worker exited with {workers[-1].process.returncode}: starting it again", flush=True)
                workers.append(start_worker(settings, LOGS))

        try:
            url = f"http://127.0.0.1:{settings.api_port}"
            tenant = os.environ.get("MEMLOG_BENCH_BOUNDS_TENANT") or f"bounds-{uuid.uuid4().hex[:6]}"
            holder["out"] = await measure(url, tenant, settings.mongo, app, supervise)
            holder["out"]["namespace"] = settings.namespace  # MEMLOG_BENCH_BOUNDS_NAMESPACE measures it again
            holder["out"]["search_max_candidates"] = settings.search_max_candidates
            holder["out"]["worker_restarts"] = len(workers) - 1
        finally:
            api.stop()
            workers[-1].stop()

    on_local_stack(run)
    print(json.dumps(holder["out"], indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(holder["out"], indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
