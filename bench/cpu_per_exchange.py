"""CPU per exchange of the API and the worker alone: the soak's accounting without its kills and its long run.

Starts a worker and an API of its own (topics and namespace of their own), POSTs EXCHANGES exchanges at
RATE a second (question, one tool call, answer, as `bench.soak --via http` does), waits until every
thread projection has applied them, and prints the CPU (user + system, from /proc) each process used
over that span, divided by the exchanges. CPU time, unlike wall time, holds up fairly well on a loaded
machine, so two code versions can be compared in one sitting by running this in turns:

    python -m bench.cpu_per_exchange --exchanges 3000 --rate 100
    PYTHONPATH=/path/to/other/checkout python -m bench.cpu_per_exchange --exchanges 3000 --rate 100

(with PYTHONPATH, the processes it starts import that checkout's code). No assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import aiohttp
from aiokafka import AIOKafkaConsumer

from bench.soak import LOGS, Samples, cpu_seconds, http_send, lag_now, produce
from memlog.adapters.connections import kafka_options
from memlog.config.settings import Settings
from memlog.dev.localstack import LocalStack
from memlog.dev.processes import free_port, isolated, start_api, start_worker
from memlog.services import open_services
from streams.topics import ensure_topics

IDLE_SECONDS = 15.0


async def measure(settings: Settings, exchanges: int, rate: int) -> None:
    await ensure_topics(settings)
    worker = await asyncio.to_thread(start_worker, settings, LOGS)
    api = await asyncio.to_thread(start_api, settings, LOGS)
    consumer = AIOKafkaConsumer(**kafka_options(settings), enable_auto_commit=False)
    await consumer.start()
    try:
        async with (
            open_services(settings) as services,
            aiohttp.ClientSession(
                f"http://127.0.0.1:{settings.api_port}", connector=aiohttp.TCPConnector(limit=64)
            ) as http,
        ):
            pids = {"worker": worker.process.pid, "api": api.process.pid}
            # what each uses doing nothing (Faust's fetch loop, timers): a long catch-up on a loaded machine
            # adds it to every exchange, so it is also given subtracted
            idle_from = ({name: cpu_seconds(pid) for name, pid in pids.items()}, time.monotonic())
            await asyncio.sleep(IDLE_SECONDS)
            idle = {
                name: (cpu_seconds(pid) - idle_from[0][name]) / (time.monotonic() - idle_from[1])
                for name, pid in pids.items()
            }
            began = {name: cpu_seconds(pid) for name, pid in pids.items()}
            started = time.monotonic()
            samples = Samples()
            await produce(http_send(http), rate, exchanges / rate, max(1, rate * 2), samples)
            produced = time.monotonic() - started
            while any((await lag_now(consumer, services, settings)).values()):
                await asyncio.sleep(0.5)
            caught_up = time.monotonic() - started - produced
            used = {name: cpu_seconds(pid) - began[name] for name, pid in pids.items()}
            span = time.monotonic() - started
    finally:
        await consumer.stop()
        api.stop()
        worker.stop()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"{samples.produced:,} exchanges in {produced:.1f}s ({samples.produce_retries} retries), "
        f"caught up {caught_up:.1f}s later; load average {load}"
    )
    count = max(1, samples.produced)
    for name, seconds in used.items():
        less_idle = (seconds - idle[name] * span) * 1000 / count
        print(
            f"  {name:8} {seconds * 1000 / count:6.3f} ms CPU per exchange; {less_idle:6.3f} ms less its idle use "
            f"({idle[name] * 100:.1f}% of a core, measured for {IDLE_SECONDS:.0f}s before)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exchanges", type=int, default=3000)
    parser.add_argument("--rate", type=int, default=100, help="exchanges a second")
    args = parser.parse_args()
    stack = Settings()
    local = LocalStack(stack)
    started = local.up()
    try:
        settings = isolated(stack, fold_agent=False, mongo_database="memlogsoak", api_port=free_port())
        asyncio.run(measure(settings, args.exchanges, args.rate))
    finally:
        local.down(started)


if __name__ == "__main__":
    main()
