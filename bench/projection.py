"""Benchmark: memlog's projections against the raw floor, on one local stack in one run.

Prints, side by side and as ratios:
- raw aiokafka consume rate of the threads topic vs the worker's session projection rate
  (events applied to Redis per second, the archive agent running beside it as deployed), and again
  with the projections split over two workers (MEMLOG_WORKER_PROJECTIONS: sessions and facts in one,
  archives, traces and privacy in the other), on topics of their own;
- a raw Redis GET of a session-sized value vs a context read (store, and over HTTP);
- a raw MongoDB find vs an archive read (a conversation's entries).
No assertions: the machines are shared and noisy, so the numbers are for reading, not gating.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, TopicPartition

from memlog.adapters.mongo_entries import GROUPS
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from memlog.dev.localstack import LocalStack
from memlog.dev.processes import free_port, isolated, start_api, start_worker
from memlog.services import open_services
from projections.archives import ConversationRef
from projections.session import ThreadKey
from schemas.exchanges import ReportedExchange, exchange_events
from streams.sealer import Sealer
from streams.topics import ensure_topics

EXCHANGES = 4000
SUBJECTS = 200
READS = 500
LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"


async def produce(settings: Settings) -> int:
    events = 0
    async with open_services(settings, producer=True) as services:
        for number in range(EXCHANGES):
            payload = {
                "tenant": "bench",
                "subject": f"player-{number % SUBJECTS:03d}",
                "question": f"what is in chest {number}?",
                "tool_calls": [
                    {
                        "name": "open_chest",
                        "arguments": {"id": number},
                        "result": {"items": [{"name": "diamond", "count": number % 64}]},
                    }
                ],
                "answer": f"{number % 64} diamonds",
            }
            batch = exchange_events(
                ReportedExchange.from_payload(payload), producer="bench", count_tokens=services.producer.count_tokens
            )
            await services.producer.produce(batch)
            events += len(batch)
    return events


async def end_offsets(settings: Settings) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(settings.threads_topic, p) for p in range(settings.partitions)]
        return {tp.partition: offset for tp, offset in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


async def consume_rate(
    settings: Settings,
    total: int,
    topics: tuple[str, ...] = ("threads",),
    *,
    decode: bool = False,
    open_sealed: bool = False,
) -> float:
    """Events/s consuming `topics` from the start: raw aiokafka (the floor), or with each record
    Avro-decoded (and opened), the least a replay must do per event."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        enable_auto_commit=False,
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
    )
    async with open_services(settings) as services:
        sealer = Sealer(services.vault, cache_seconds=3600.0)  # as replay keeps keys
        await consumer.start()
        try:
            tps = [TopicPartition(settings.topic(t), p) for t in topics for p in range(settings.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            seen = 0
            started = time.perf_counter()
            while seen < total:
                for records in (await consumer.getmany(timeout_ms=2000, max_records=20_000)).values():
                    if decode:
                        decoded = [services.codec.decode(record.value) for record in records]
                        if open_sealed:
                            await sealer.open_many([(d.full_name, d.record) for d in decoded])
                    seen += len(records)
            return seen / (time.perf_counter() - started)
        finally:
            await consumer.stop()


async def wait_applied(settings: Settings, ends: dict[int, int], checkpoints: str) -> float:
    """Seconds until every partition's checkpoint reaches its end offset."""
    started = time.perf_counter()
    async with open_services(settings) as services:
        while True:
            if checkpoints == "sessions":
                applied = [await services.sessions.applied("threads", p) for p in ends]
            else:
                applied = [await services.archive_checkpoints.applied("threads", p) for p in ends]
            if all(a >= ends[p] - 1 for a, p in zip(applied, ends, strict=True)):
                return time.perf_counter() - started
            await asyncio.sleep(0.02)


# the measuring process collects its garbage between timed calls, never during one (as timeit does)
COLLECT_EVERY = 100


@contextlib.contextmanager
def collector_paused() -> Iterator[Callable[[int], None]]:
    """This process's cyclic garbage collector off while calls are timed; what it returns collects, untimed,
    every COLLECT_EVERY rounds. A collection here (measured: up to 98 ms for a full one, 2.6 ms p99 for
    the middle generation in a context-read run) would land on whichever call allocated last, and the
    client's pause is not the latency of the call measured. The servers measured keep their own collector."""
    was_on = gc.isenabled()
    gc.collect()
    gc.disable()

    def between(done: int) -> None:
        if done % COLLECT_EVERY == 0:
            gc.collect()

    try:
        yield between
    finally:
        if was_on:
            gc.enable()


async def latencies(call: object, count: int = READS) -> tuple[float, float]:
    samples = []
    with collector_paused() as between:
        for done in range(count):
            started = time.perf_counter()
            await call()  # type: ignore[operator]
            samples.append(time.perf_counter() - started)
            between(done + 1)
    samples.sort()
    return statistics.median(samples) * 1e3, samples[int(len(samples) * 0.99) - 1] * 1e3


async def interleaved(calls: list[Callable[[int], Awaitable[Any]]], rounds: int) -> list[list[float]]:
    """Each call's latencies (ms) over the same rounds, interleaved: round i runs every call on query i,
    starting from a different one each round, so the machine's noise falls on all of them alike. A
    warm-up round of each comes first, untimed. This process's garbage is collected between rounds,
    untimed (`collector_paused`)."""
    for call in calls:
        await call(0)
    taken: list[list[float]] = [[] for _ in calls]
    with collector_paused() as between:
        for i in range(rounds):
            for k in range(len(calls)):
                which = (i + k) % len(calls)
                started = time.perf_counter()
                await calls[which](i)
                taken[which].append((time.perf_counter() - started) * 1000)
            between(i + 1)
    return taken


def quantiles(values: list[float]) -> tuple[float, float]:
    """p50 and p99."""
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[98]


def on_local_stack(run: Callable[[Settings], Awaitable[None]]) -> None:
    """Run a benchmark on the local stack (started if missing), with topics and namespaces of its own."""
    stack = Settings()
    local = LocalStack(stack)
    started = local.up()
    try:
        asyncio.run(run(isolated(stack, api_port=free_port())))
    finally:
        local.down(started)


def line(label: str, value: float, unit: str) -> None:
    print(f"  {label:52} {value:12,.2f} {unit}")


async def read_floors(settings: Settings) -> None:
    subject = ThreadKey.session("bench", "player-007")
    async with open_services(settings) as services:
        session = await services.sessions.read(subject)
        assert session is not None
        blob = json.dumps([e.view() for e in session.exchanges])
        redis = aioredis.Redis.from_url(settings.redis)
        await redis.set(f"{settings.redis_prefix}:bench:blob", blob)
        raw_get = await latencies(lambda: redis.get(f"{settings.redis_prefix}:bench:blob"))
        store_read = await latencies(lambda: services.sessions.read(subject))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.api_port}") as http:
            url = "/v1/tenants/bench/subjects/player-007/context"
            http_read = await latencies(lambda: http.get(url))
        mongo = mongo_client(settings.mongo)
        collection = mongo[settings.mongo_db_name][GROUPS]
        query = {"tenant": "bench", "thread": "session", "owner": "player-007", "conversation": "main"}
        raw_find = await latencies(lambda: collection.find(query).sort("last", 1).to_list(), 200)
        ref = ConversationRef("bench", "session", "player-007")
        read = services.conversations.entries
        archive_read = await latencies(lambda: read(ref, scope="history", snapshot=2**61), 200)
        await redis.aclose()
        await mongo.close()
    print(f"\nreads of one session ({len(session.exchanges)} exchanges, {len(blob):,} bytes as JSON), median / p99:")
    print(f"  {'raw Redis GET of the same bytes':52} {raw_get[0]:8.3f} / {raw_get[1]:.3f} ms")
    print(
        f"  {'memlog session read (store)':52} {store_read[0]:8.3f} / {store_read[1]:.3f} ms"
        f"   x{store_read[0] / raw_get[0]:.1f} the floor"
    )
    print(
        f"  {'memlog context read (HTTP API)':52} {http_read[0]:8.3f} / {http_read[1]:.3f} ms"
        f"   x{http_read[0] / raw_get[0]:.1f} the floor"
    )
    print(f"  {'raw MongoDB find of the same entries':52} {raw_find[0]:8.3f} / {raw_find[1]:.3f} ms")
    print(
        f"  {'memlog archive read':52} {archive_read[0]:8.3f} / {archive_read[1]:.3f} ms"
        f"   x{archive_read[0] / raw_find[0]:.1f} the floor"
    )


async def run(settings: Settings) -> None:
    await ensure_topics(settings)
    started = time.perf_counter()
    total = await produce(settings)
    print(
        f"produced {EXCHANGES:,} exchanges = {total:,} events over {SUBJECTS} subjects "
        f"in {time.perf_counter() - started:.1f}s"
    )
    ends = await end_offsets(settings)
    raw_rate = await consume_rate(settings, total)
    worker = await asyncio.to_thread(start_worker, settings, LOGS)
    api = await asyncio.to_thread(start_api, settings, LOGS)
    try:
        session_seconds = await wait_applied(settings, ends, "sessions")
        archive_seconds = session_seconds + await wait_applied(settings, ends, "archive")
        session_rate = total / session_seconds
        print("\nprojection of the threads topic (events/s):")
        line("raw aiokafka consume (the floor)", raw_rate, "events/s")
        line("memlog session projection into Redis (Faust worker)", session_rate, "events/s")
        line("memlog archive projection into MongoDB (same worker)", total / archive_seconds, "events/s")
        print(
            f"  ratio, session projection / raw consume: {session_rate / raw_rate:.3f} "
            f"(raw is {raw_rate / session_rate:.1f}x faster)"
        )
        await read_floors(settings)
    finally:
        api.stop()
        worker.stop()
    await split_workers(isolated(settings))


SPLIT = ("sessions,facts", "archives,traces,privacy")


async def split_workers(settings: Settings) -> None:
    """The same events, with the projections a context read waits for in a worker of their own."""
    await ensure_topics(settings)
    total = await produce(settings)
    ends = await end_offsets(settings)
    raw_rate = await consume_rate(settings, total)
    workers = []
    try:
        for which in SPLIT:
            scoped = settings.model_copy(update={"worker_projections": which})
            workers.append(await asyncio.to_thread(start_worker, scoped, LOGS))
        session_seconds = await wait_applied(settings, ends, "sessions")
        archive_seconds = session_seconds + await wait_applied(settings, ends, "archive")
        session_rate = total / session_seconds
        print(f"\nthe same, with two workers ({' | '.join(SPLIT)}), on topics of their own:")
        line("raw aiokafka consume (the floor)", raw_rate, "events/s")
        line("memlog session projection into Redis", session_rate, "events/s")
        line("memlog archive projection into MongoDB", total / archive_seconds, "events/s")
        print(f"  ratio, session projection / raw consume: {session_rate / raw_rate:.3f}")
    finally:
        for worker in workers:
            worker.stop()


if __name__ == "__main__":
    on_local_stack(run)
