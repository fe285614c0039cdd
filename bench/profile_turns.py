"""Profile: a worker and an API under cProfile while turns are made one after another (POST an exchange,
then read the context with `after=` holding it), as bench/freshness.py measures them. Prints the POST's
and the read's medians, and writes each process's profile where `--out` says, for pstats:

    python -m bench.profile_turns --turns 300 --out /tmp/memlog-prof
    python -c "import pstats; pstats.Stats('/tmp/memlog-prof-worker.out').sort_stats('cumtime').print_stats(30)"

The processes stop with SIGINT, so that cProfile writes what it gathered. No assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import subprocess
import sys
import time

import aiohttp

from bench.freshness import TENANT, turn
from bench.projection import on_local_stack
from memlog.config.settings import Settings
from memlog.dev.processes import settings_env
from streams.topics import ensure_topics

WARM_UP = 10


async def turns(base: str, count: int) -> None:
    async with aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(limit=1)) as http:
        for _ in range(300):
            try:
                async with http.get("/healthz") as health:
                    if health.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
        posts, reads = [], []
        for number in range(count + WARM_UP):
            started = time.perf_counter()
            async with http.post("/v1/exchanges", json=turn("ada", number)) as posted:
                position = (await posted.json())["position"]
            accepted = time.perf_counter()
            while True:
                url = f"/v1/tenants/{TENANT}/subjects/ada/context"
                async with http.get(url, params={"after": position}) as read:
                    await read.read()
                    if read.status != 503:
                        break
            if number >= WARM_UP:
                posts.append((accepted - started) * 1000)
                reads.append((time.perf_counter() - accepted) * 1000)
            await asyncio.sleep(0.02)
        print(f"POST p50 {statistics.median(posts):.1f} ms; the read after it p50 {statistics.median(reads):.1f} ms")


async def run(settings: Settings, count: int, out: str) -> None:
    await ensure_topics(settings)
    env = settings_env(settings)
    processes = [
        await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "cProfile", "-o", f"{out}-{part}.out", "-m", "memlog", part),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for part in ("worker", "api")
    ]
    try:
        await turns(f"http://127.0.0.1:{settings.api_port}", count)
    finally:
        for process in processes:
            process.send_signal(signal.SIGINT)
        for process in processes:
            await asyncio.wait_for(process.wait(), 60)
    print(f"profiles: {out}-worker.out, {out}-api.out")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--out", default="/tmp/memlog-prof")
    args = parser.parse_args()
    on_local_stack(lambda settings: run(settings, args.turns, args.out))


if __name__ == "__main__":
    main()
