"""Benchmark: write to readable. A backend POSTs an exchange, then reads the subject's context with
`after=<position>`: the time from the POST until that read answers with the exchange in it.

Beside it, in the same run and interleaved with it, the floor: a record produced with aiokafka
(acks=all, as memlog's producer) and read by a consumer already waiting on the same broker. Each
is measured with the service idle, then under a background of other subjects' exchanges POSTed at
`--background` a second. Prints p50 / p99 of each and the ratios to the floor of the same phase.

    python -m bench.freshness                     # 300 samples per phase, 50 exchanges/s behind
    python -m bench.freshness --samples 500 --background 50
    python -m bench.freshness --split             # the worker sets `memlog up` runs (MEMLOG_UP_WORKER_SETS)

HTTP is aiohttp's client on kept-alive connections, one for the measured turns and others for the
background. No assertions: shared machines are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.projection import on_local_stack, quantiles
from memlog.adapters.connections import kafka_options
from memlog.config.settings import Settings
from memlog.dev.processes import start_api, start_worker
from streams.topics import ensure_topics

LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"
TENANT = "fresh"
PAUSE_SECONDS = 0.02  # between two samples: a turn follows the last one quickly, not back to back


def turn(subject: str, number: int) -> dict[str, object]:
    return {
        "tenant": TENANT,
        "subject": subject,
        "question": f"what did we find at the {number}th cave?",
        "tool_calls": [{"name": "look", "arguments": {"n": number}, "result": {"found": ["iron", "coal"]}}],
        "answer": f"iron and coal at cave {number}",
    }


@contextlib.asynccontextmanager
async def kafka_floor(settings: Settings) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """A topic of its own, a producer and an already-waiting consumer: one call produces a record and
    returns when the consumer has it."""
    topic = f"{settings.topic_prefix}.bench-floor"
    admin = AIOKafkaAdminClient(**kafka_options(settings))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, settings.replication)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(**kafka_options(settings), acks="all")
    consumer = AIOKafkaConsumer(**kafka_options(settings), enable_auto_commit=False)
    await producer.start()
    await consumer.start()
    consumer.assign([TopicPartition(topic, 0)])
    await consumer.seek_to_end(TopicPartition(topic, 0))
    arrived: dict[bytes, asyncio.Future[None]] = {}

    async def consume() -> None:
        async for record in consumer:
            waiter = arrived.pop(record.value or b"", None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    reading = asyncio.create_task(consume())

    async def once() -> None:
        value = uuid.uuid4().bytes
        waiter = arrived[value] = asyncio.get_running_loop().create_future()
        await producer.send_and_wait(topic, value)
        await asyncio.wait_for(waiter, 30)

    try:
        for _ in range(20):  # the consumer has its position once a record comes through
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(once(), 5)
                break
        yield once
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
        await consumer.stop()
        await producer.stop()


class FellBehind(RuntimeError):
    """A write still not readable with after= at the turn's deadline: the projection fell behind."""


def memlog_turn(http: aiohttp.ClientSession, subject: str) -> Callable[[], Awaitable[None]]:
    """POST an exchange, then read the context with after= until it holds it (a 503 is read again)."""
    numbers = itertools.count()
    url = f"/v1/tenants/{TENANT}/subjects/{subject}/context"

    async def once() -> None:
        number = next(numbers)
        async with http.post("/v1/exchanges", json=turn(subject, number)) as posted:
            if posted.status != 202:
                raise RuntimeError(f"POST: {posted.status} {await posted.text()}")
            position = (await posted.json())["position"]
        deadline = time.monotonic() + 120
        while True:
            async with http.get(url, params={"after": position, "wait": "30"}) as read:
                if read.status == 503 and time.monotonic() < deadline:
                    continue
                if read.status == 503:
                    raise FellBehind(f"a write not readable {time.monotonic() - deadline + 120:.0f}s after its POST")
                if read.status != 200:
                    raise RuntimeError(f"GET: {read.status} {await read.text()}")
                body = await read.read()
            if f"cave {number}".encode() in body:
                return
            raise RuntimeError(f"exchange {number} missing from a read after its position")

    return once


async def background(api: str, rate: int, stop: asyncio.Event) -> int:
    """Other subjects' exchanges at `rate` a second, each POST on its own schedule; how many were sent."""
    sent = 0
    async with aiohttp.ClientSession(api, connector=aiohttp.TCPConnector(limit=16)) as http:
        started = time.monotonic()
        pending: set[asyncio.Task[None]] = set()

        async def post(number: int) -> None:
            # many subjects, so none nears the fold threshold while measured (folds are not what is measured)
            async with http.post("/v1/exchanges", json=turn(f"busy-{number % 500}", number)) as answer:
                await answer.read()

        for number in itertools.count():
            if stop.is_set():
                break
            due = started + number / rate
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            task = asyncio.create_task(post(number))
            pending.add(task)
            task.add_done_callback(pending.discard)
            sent += 1
        await asyncio.gather(*pending, return_exceptions=True)
    return sent


async def phase(
    label: str, floor: Callable[[], Awaitable[None]], fresh: Callable[[], Awaitable[None]], samples: int
) -> None:
    """The two interleaved, one after the other in turn, so the machine's noise falls on both alike."""
    taken: dict[str, list[float]] = {"floor": [], "memlog": []}
    await floor()
    await fresh()  # warm-up, untimed
    for i in range(samples):
        order = [("floor", floor), ("memlog", fresh)] if i % 2 == 0 else [("memlog", fresh), ("floor", floor)]
        for name, call in order:
            started = time.perf_counter()
            await call()
            taken[name].append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(PAUSE_SECONDS)
    base = quantiles(taken["floor"])
    mine = quantiles(taken["memlog"])
    load = " / ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"\n{label}, {samples} samples each (load average after: {load}):")
    print(f"  {'aiokafka produce -> waiting consumer (floor)':52} p50 {base[0]:7.2f} ms   p99 {base[1]:7.2f} ms")
    print(
        f"  {'POST, then context with after= holding it':52} p50 {mine[0]:7.2f} ms   p99 {mine[1]:7.2f} ms"
        f"   x{mine[0] / base[0]:5.1f} (p50)  x{mine[1] / base[1]:5.1f} (p99)"
    )


@contextlib.asynccontextmanager
async def memlog_running(settings: Settings, split: bool) -> AsyncIterator[str]:
    """memlog's worker (or, with `split`, a worker per set, as `memlog up` runs them) and API, started for
    the run and stopped after it; yields the API's base URL."""
    await ensure_topics(settings)
    sets = [",".join(which) for which in settings.up_sets()] if split else ["all"]
    workers = [
        await asyncio.to_thread(start_worker, settings.model_copy(update={"worker_projections": which}), LOGS)
        for which in sets
    ]
    api = await asyncio.to_thread(start_api, settings, LOGS)
    print(f"worker sets: {' | '.join(sets)}")
    try:
        yield f"http://127.0.0.1:{settings.api_port}"
    finally:
        api.stop()
        for worker in workers:
            worker.stop()


async def run(settings: Settings, samples: int, rate: int, split: bool) -> None:
    async with (
        memlog_running(settings, split) as base,
        kafka_floor(settings) as floor,
        aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(limit=1)) as http,
    ):
        fresh = memlog_turn(http, "ada")
        for _ in range(5):
            await fresh()
        await phase("idle", floor, fresh, samples)
        stop = asyncio.Event()
        behind = asyncio.create_task(background(base, rate, stop))
        await asyncio.sleep(3)  # the background settles
        try:
            await phase(f"under {rate} other exchanges/s", floor, fresh, samples)
        except FellBehind as behind_by:
            print(f"\nunder {rate} other exchanges/s: {behind_by} (the worker fell behind the background)")
        stop.set()
        sent = await behind
        print(f"  (background: {sent} exchanges POSTed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--background", type=int, default=50, help="other exchanges a second, under load")
    parser.add_argument("--split", action="store_true", help="a worker per set of MEMLOG_UP_WORKER_SETS, as memlog up")
    args = parser.parse_args()
    on_local_stack(lambda settings: run(settings, args.samples, args.background, args.split))


if __name__ == "__main__":
    main()
