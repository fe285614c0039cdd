"""Benchmark: where a write's way to readable goes, step by step, seen from outside the processes.

One turn is `bench.freshness`'s: POST an exchange, then read the context with `after=` until it holds
it. Beside it, two observers that wait already: a consumer of the threads topic (the moment the
exchange's last record can be fetched, which is the worker's earliest) and a subscriber to the
sessions projection's checkpoint moves (the ADVANCE script's PUBLISH: the moment the exchange is
applied and a waiting read is told). Each turn gives, from the moment its POST is sent:

    POST answered          the API sealed, produced (acks=all) and answered
    fetchable              a waiting consumer has the exchange's last record
    applied                the sessions projection's checkpoint moved past it
    read answered          the context read with after= answered, holding it

and the steps between: the worker's (fetchable -> applied) and the read's (applied -> answered). Beside
them the floor of `bench.freshness`, interleaved: aiokafka produce (acks=all) to a waiting consumer.

    python -m bench.freshness_steps                      # 200 turns idle, then 200 under 50 exchanges/s
    python -m bench.freshness_steps --turns 300 --background 50 --split

No assertions: shared machines are noisy; compare the steps with the floor of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.freshness import TENANT, background, kafka_floor, memlog_running, turn
from bench.projection import on_local_stack, quantiles
from memlog.adapters.connections import kafka_options
from memlog.config.settings import Settings
from projections.position import Position

PAUSE_SECONDS = 0.02
STEPS = ("POST answered", "fetchable", "applied", "read answered")


class Seen:
    """When each (partition, offset) was first seen by an observer, and a way to wait for one."""

    def __init__(self) -> None:
        self.at: dict[tuple[int, int], float] = {}
        self._moved = asyncio.Event()

    def saw(self, partition: int, offset: int) -> None:
        self.at.setdefault((partition, offset), time.perf_counter())
        self._moved.set()

    async def when(self, partition: int, offset: int, covers: bool) -> float:
        """The moment `offset` (or, with `covers`, any offset past it) was seen on `partition`."""
        while True:
            found = [t for (p, o), t in self.at.items() if p == partition and (o == offset or (covers and o > offset))]
            if found:
                return min(found)
            self._moved.clear()
            await asyncio.wait_for(self._moved.wait(), 60)


@contextlib.asynccontextmanager
async def observers(settings: Settings) -> AsyncIterator[tuple[Seen, Seen]]:
    """(fetchable, applied): a consumer at the threads topic's end, and the sessions' checkpoint channel."""
    fetchable, applied = Seen(), Seen()
    topic = settings.topic("threads")
    consumer = AIOKafkaConsumer(**kafka_options(settings), enable_auto_commit=False)
    await consumer.start()
    parts = [TopicPartition(topic, p) for p in range(settings.partitions)]
    consumer.assign(parts)
    await consumer.seek_to_end(*parts)
    redis = aioredis.Redis.from_url(settings.redis)
    pubsub = redis.pubsub()
    await pubsub.subscribe(f"{settings.redis_prefix}:applied:threads")

    async def consume() -> None:
        async for record in consumer:
            fetchable.saw(record.partition, record.offset)

    async def listen() -> None:
        async for message in pubsub.listen():
            if message.get("type") == "message":
                partition, offset = bytes(message["data"]).decode().split(":")
                applied.saw(int(partition), int(offset))

    tasks = [asyncio.create_task(consume()), asyncio.create_task(listen())]
    try:
        yield fetchable, applied
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await consumer.stop()
        await pubsub.aclose()
        await redis.aclose()


def stepped_turn(
    http: aiohttp.ClientSession, subject: str, fetchable: Seen, applied: Seen
) -> Callable[[], Awaitable[dict[str, float]]]:
    """One turn, timed at each step (ms since its POST was sent)."""
    numbers = iter(range(1 << 30))
    url = f"/v1/tenants/{TENANT}/subjects/{subject}/context"

    async def once() -> dict[str, float]:
        number = next(numbers)
        started = time.perf_counter()
        async with http.post("/v1/exchanges", json=turn(subject, number)) as posted:
            if posted.status != 202:
                raise RuntimeError(f"POST: {posted.status} {await posted.text()}")
            token = (await posted.json())["position"]
        answered = time.perf_counter()
        position = Position.parse(token)
        while True:
            async with http.get(url, params={"after": token, "wait": "30"}) as read:
                if read.status == 503:
                    continue
                body = await read.read()
            break
        read_at = time.perf_counter()
        if f"cave {number}".encode() not in body:
            raise RuntimeError(f"exchange {number} missing from a read after its position")
        seen = await fetchable.when(position.partition, position.offset, covers=False)
        moved = await applied.when(position.partition, position.offset, covers=True)
        return {
            "POST answered": (answered - started) * 1000,
            "fetchable": (seen - started) * 1000,
            "applied": (moved - started) * 1000,
            "read answered": (read_at - started) * 1000,
        }

    return once


async def phase(
    label: str, floor: Callable[[], Awaitable[None]], once: Callable[[], Awaitable[dict[str, float]]], turns: int
) -> None:
    floors: list[float] = []
    steps: dict[str, list[float]] = {name: [] for name in (*STEPS, "worker", "read after applied")}
    await once()  # warm-up
    for _ in range(turns):
        started = time.perf_counter()
        await floor()
        floors.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(PAUSE_SECONDS)
        timed = await once()
        for name in STEPS:
            steps[name].append(timed[name])
        steps["worker"].append(timed["applied"] - timed["fetchable"])
        steps["read after applied"].append(timed["read answered"] - max(timed["applied"], timed["POST answered"]))
        await asyncio.sleep(PAUSE_SECONDS)
    base = quantiles(floors)
    load = " / ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"\n{label}, {turns} turns (load average after: {load}):")
    print(f"  {'floor: aiokafka produce -> waiting consumer':44} p50 {base[0]:7.2f} ms   p99 {base[1]:7.2f} ms")
    for name, values in steps.items():
        p50, p99 = quantiles(values)
        since = "since the POST" if name in STEPS else "step"
        print(f"  {name + ' (' + since + ')':44} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   x{p50 / base[0]:5.1f} (p50)")


async def run(settings: Settings, turns: int, rate: int, split: bool) -> None:
    async with (
        memlog_running(settings, split) as base,
        kafka_floor(settings) as floor,
        observers(settings) as (fetchable, applied),
        aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(limit=1)) as http,
    ):
        once = stepped_turn(http, "ada", fetchable, applied)
        await phase("idle", floor, once, turns)
        if rate:
            stop = asyncio.Event()
            behind = asyncio.create_task(background(base, rate, stop))
            await asyncio.sleep(3)
            try:
                await phase(f"under {rate} other exchanges/s", floor, once, turns)
            finally:
                stop.set()
                await behind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--background", type=int, default=50, help="other exchanges a second (0: idle only)")
    parser.add_argument("--split", action="store_true", help="a worker per set of MEMLOG_UP_WORKER_SETS, as memlog up")
    args = parser.parse_args()
    on_local_stack(lambda settings: run(settings, args.turns, args.background, args.split))


if __name__ == "__main__":
    main()
