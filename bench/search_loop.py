"""How long the API's event loop is held during searches (issue 41: /healthz under 50 ms while an agent
searches 1,200 exchanges of 22 KB): the API in this process, its loop timed by a probe that sleeps 1 ms
at a time, and for every pause past 4 ms how much of it the loop's thread ran on a core and how much it
waited for one (Linux's /proc/<pid>/task/<tid>/schedstat). Run time is the loop's own work; waiting is
the machine's load. A client process runs the searches, polling /healthz every 10 ms meanwhile.

Measures a tenant bench/search_bounds.py loaded before, in its run's namespace (printed as `namespace`):

    MEMLOG_BENCH_BOUNDS_TENANT=bounds-1a2b3c MEMLOG_BENCH_BOUNDS_NAMESPACE=t0123456789 \\
        python -m bench.search_loop [--rounds 4] [--neighbours 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

QUERIES = ["agent lantern", "agent zephyrine", "agent ü", "thread lantern", "thread zephyrine"]
GAP = 0.004  # pauses of the 1 ms sleep longer than this are looked at


def paths(tenant: str) -> dict[str, str]:
    return {
        "agent": f"/v1/tenants/{tenant}/agents/bounds/search",
        "thread": f"/v1/tenants/{tenant}/threads/session:keeper/search",
    }


async def client(port: int, tenant: str, rounds: int, neighbours: int) -> dict[str, Any]:
    import httpx

    out: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
        for _ in range(rounds):
            for query in QUERIES:
                route, word = query.split()
                params = {"q": word, "scope": "history", "neighbours": neighbours, "limit": 10}
                started = time.perf_counter()
                task = asyncio.ensure_future(http.get(paths(tenant)[route], params=params))
                slowest = 0.0
                while not task.done():
                    polled = time.perf_counter()
                    await http.get("/healthz")
                    slowest = max(slowest, time.perf_counter() - polled)
                    await asyncio.sleep(0.01)
                task.result().raise_for_status()
                row = out.setdefault(query, {"ms": [], "healthz_max_ms": 0.0})
                row["ms"].append(round((time.perf_counter() - started) * 1000, 1))
                row["healthz_max_ms"] = max(row["healthz_max_ms"], round(slowest * 1000, 1))
    return out


def serve(args: argparse.Namespace) -> dict[str, Any]:
    import uvicorn
    import uvloop

    from memlog.api import create_api
    from memlog.config.settings import Settings
    from memlog.dev.processes import free_port, isolated

    tenant, namespace = os.environ["MEMLOG_BENCH_BOUNDS_TENANT"], os.environ["MEMLOG_BENCH_BOUNDS_NAMESPACE"]
    port = free_port()
    update = {"embeddings": "none", "backend_tokens": {}, "operator_tokens": [], "credentials_file": None}
    settings = isolated(Settings(), api_port=port, namespace=namespace, api_host="127.0.0.1", **update)
    server = uvicorn.Server(uvicorn.Config(create_api(settings), host="127.0.0.1", port=port, log_level="warning"))
    tid = threading.get_native_id()
    pauses: list[tuple[float, float, float]] = []  # (pause, on a core, waiting for one), ms
    armed = False

    def sched() -> tuple[float, float]:
        with open(f"/proc/self/task/{tid}/schedstat") as stat:
            ran, waited, _ = stat.read().split()
        return int(ran) / 1e6, int(waited) / 1e6

    async def probe() -> None:
        while True:
            started, (ran, waited) = time.perf_counter(), sched()
            await asyncio.sleep(0.001)
            pause = time.perf_counter() - started
            if armed and pause > GAP:
                now_ran, now_waited = sched()
                pauses.append((round(pause * 1000, 1), round(now_ran - ran, 1), round(now_waited - waited, 1)))

    async def run() -> dict[str, Any]:
        nonlocal armed
        asyncio.get_running_loop().create_task(probe())
        serving = asyncio.get_running_loop().create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.1)
        await client(port, tenant, 1, args.neighbours)  # each route's first search: FastAPI builds its state then
        armed = True
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.search_loop", "--client", str(port), "--rounds", str(args.rounds),
            "--neighbours", str(args.neighbours), stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        searched, _ = await worker.communicate()
        armed = False
        server.should_exit = True
        await serving
        return json.loads(searched)

    load = [round(x, 2) for x in os.getloadavg()]
    searches = uvloop.run(run())
    return {
        "load_average_before": load,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "searches": searches,
        "pauses_over_4_ms": len(pauses),
        "longest_on_a_core_ms": sorted(pauses, key=lambda p: -p[1])[:5],
        "longest_pauses_ms": sorted(pauses, reverse=True)[:5],
        "columns": "(pause, the loop's thread on a core, waiting for a core), ms",
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--neighbours", type=int, default=1)
    parser.add_argument("--client", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client is not None:
        tenant = os.environ["MEMLOG_BENCH_BOUNDS_TENANT"]
        print(json.dumps(asyncio.run(client(args.client, tenant, args.rounds, args.neighbours))))
        return
    print(json.dumps(serve(args), indent=1))


if __name__ == "__main__":
    main()
