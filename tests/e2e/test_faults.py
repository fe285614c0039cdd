"""Redis, the MongoDB-protocol server and Kafka stopped and restarted mid-stream: nothing is lost, nothing doubled.

Each scenario records 10,000 exchanges (200 subjects x 50; a session folds at 100) with stable exchange
ids: most straight onto Kafka with the EventProducer, one in five through the HTTP API with an
idempotency key. Both writers retry what the service refuses (LogUnavailable, or 503/409 honouring
Retry-After), so a retry can land a second copy of an exchange but never a second exchange. The
real local service is stopped after 3,000 exchanges and started again a few seconds later while the
stream goes on (past 6,000 it waits for the restart, so it also runs after it); then every session
must hold its 50 exchanges exactly once, in order, the archive every event, and /readyz must have
said not-ready while the service was down and ready at the end.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from memlog.adapters.mongo_entries import GROUPS, entry_docs
from memlog.adapters.mongo_store import MongoCheckpoints, mongo_client
from memlog.config.settings import Settings
from memlog.dev.localstack import LocalStack
from memlog.dev.processes import free_port, start_api, start_worker
from memlog.services import open_services
from schemas.errors import LogUnavailable, StoreUnavailable
from streams.producer import EventProducer
from streams.topics import ensure_topics
from tests.conftest import unique_settings
from tests.e2e.conftest import LOGS, api_client

SUBJECTS = 200
PER_SUBJECT = 50  # below the 100-exchange fold, so a session still holds every exchange
HTTP_EVERY = 5  # one exchange in five goes through the HTTP API
IN_FLIGHT = 32
STOP_AFTER = 3_000
RESUME_AT = 6_000  # past this the stream waits for the restart, so it goes on after it
DOWN_SECONDS = 8.0
GAUGE_BOUND = 120.0  # a bound on waiting for the worker to notice the outage, not a timing check
RECOVERY_BOUND = 600.0  # a bound on waiting for the projections, not a timing check
TENANT = "faults"


@dataclass
class Tally:
    posted: int = 0
    http_posts: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # answers that were retried, by kind
    during_outage: int = 0
    stopped_after: int = -1
    restarted_after: int = -1
    down_for: float = 0.0
    ready_while_down: list[int] = field(default_factory=list)
    write_while_down: list[int] = field(default_factory=list)
    worker_unavailable: dict[str, float] = field(default_factory=dict)  # the worker's gauge while down
    last: dict[str, str] = field(default_factory=dict)
    outage: bool = False


def exchange(subject: str, number: int) -> dict[str, Any]:
    return {
        "tenant": TENANT,
        "subject": subject,
        "exchange_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{subject}/{number}")),
        "question": f"{subject} q{number}",
        "tool_calls": [{"name": "count", "arguments": {"n": number}, "result": number}],
        "answer": f"a{number}",
    }


async def post_http(http: httpx.AsyncClient, payload: dict[str, Any], tally: Tally) -> str:
    """POST until accepted; 503 and 409 carry Retry-After, which is honoured. Anything else fails the test."""
    body = {**payload, "idempotency_key": payload["exchange_id"]}
    while True:
        try:
            response = await http.post("/v1/exchanges", json=body)
        except httpx.TransportError as exc:  # the API itself never stops here; a slow answer is retried
            tally.refused[f"http {type(exc).__name__}"] += 1
            continue
        if response.status_code == 202:
            tally.http_posts += 1
            return str(response.json()["position"])
        assert response.status_code in (503, 409), f"{response.status_code}: {response.text}"
        assert "retry-after" in response.headers, response.headers
        tally.refused[f"http {response.status_code}"] += 1
        tally.during_outage += tally.outage
        await asyncio.sleep(float(response.headers["retry-after"]))


async def post_direct(producer: EventProducer, payload: dict[str, Any], tally: Tally) -> str:
    while True:
        try:
            recorded = await producer.record_exchange(payload)
            return recorded.position.token()
        except (LogUnavailable, StoreUnavailable) as exc:  # sealing needs the key vault in MongoDB
            tally.refused[f"producer {type(exc).__name__}"] += 1
            tally.during_outage += tally.outage
            await asyncio.sleep(1.0)


async def stream_with_outage(
    settings: Settings, local: LocalStack, service_name: str, expect_unavailable: tuple[str, ...] = ()
) -> Tally:
    """Record the 10,000 exchanges, stopping and restarting one service in the middle; read them all back."""
    await ensure_topics(settings)
    service = local.service(service_name)
    assert service.managed_pid() is not None, f"{service_name} must be the local stack's own process"
    worker = start_worker(settings, LOGS)
    api = start_api(settings, LOGS)
    tally = Tally()
    try:
        async with (
            api_client(settings) as http,
            open_services(settings, producer=True) as services,
        ):
            producer = services.producer
            restarted = asyncio.Event()

            async def post_subject(subject: str) -> None:
                for number in range(PER_SUBJECT):
                    if tally.posted >= RESUME_AT:
                        await restarted.wait()
                    payload = exchange(subject, number)
                    if number % HTTP_EVERY == 0:
                        tally.last[subject] = await post_http(http, payload, tally)
                    else:
                        tally.last[subject] = await post_direct(producer, payload, tally)
                    tally.posted += 1

            semaphore = asyncio.Semaphore(IN_FLIGHT)

            async def bounded(subject: str) -> None:
                async with semaphore:
                    await post_subject(subject)

            async def outage() -> None:
                while tally.posted < STOP_AFTER:
                    await asyncio.sleep(0.05)
                tally.stopped_after = tally.posted
                tally.outage = True
                stopped = time.monotonic()
                assert await asyncio.to_thread(service.stop), f"{service_name} was not stopped"
                await asyncio.sleep(DOWN_SECONDS)
                # the service is down: the API must say it is not ready (and not crash)
                tally.ready_while_down.append((await http.get("/readyz")).status_code)
                # and a write either lands (it needs only Kafka) or is refused with 503 and Retry-After
                probe = await http.post("/v1/exchanges", json={**exchange("probe", 0), "tenant": "faults-probe"})
                tally.write_while_down.append(probe.status_code)
                # the projections that need the service say so once they next try to write; a worker still
                # starting up or catching up may take a while to get there, so the service stays down until then
                wait_until = time.monotonic() + GAUGE_BOUND
                while True:
                    metrics = await http.get(f"http://127.0.0.1:{settings.worker_metrics_port}/metrics")
                    tally.worker_unavailable = dict(
                        re.findall(r'memlog_projection_unavailable\{projection="([a-z-]+)"\} (\S+)', metrics.text)
                    )
                    seen = all(tally.worker_unavailable.get(name) == "1.0" for name in expect_unavailable)
                    if seen or time.monotonic() > wait_until:
                        break
                    await asyncio.sleep(0.5)
                assert probe.status_code in (202, 503), probe.text
                assert probe.status_code == 202 or probe.headers["retry-after"] == "2"
                assert await asyncio.to_thread(service.start), f"{service_name} was not started again"
                tally.down_for = time.monotonic() - stopped
                tally.outage = False
                tally.restarted_after = tally.posted
                restarted.set()

            started = time.monotonic()
            await asyncio.gather(outage(), *(bounded(f"s{i:03d}") for i in range(SUBJECTS)))
            posted_in = time.monotonic() - started

            deadline = time.monotonic() + RECOVERY_BOUND
            for subject in sorted(tally.last):
                while True:
                    response = await http.get(
                        f"/v1/tenants/{TENANT}/subjects/{subject}/context", params={"after": tally.last[subject]}
                    )
                    if response.status_code == 200 or time.monotonic() > deadline:
                        break
                    assert response.status_code == 503, response.text
                assert response.status_code == 200, response.text
                ids = [e["exchange_id"] for e in response.json()["exchanges"]]
                questions = [e["question"] for e in response.json()["exchanges"]]
                assert questions == [f"{subject} q{n}" for n in range(PER_SUBJECT)], subject
                assert len(set(ids)) == PER_SUBJECT, subject
            caught_up = time.monotonic() - started

            while (ready := await http.get("/readyz")).status_code != 200 and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
            assert ready.status_code == 200, ready.text
            await assert_archive_holds_every_exchange(settings, deadline)
        summary = (
            f"\n{service_name}: {tally.posted} exchanges ({tally.http_posts} over HTTP) posted in {posted_in:.1f}s; "
            f"stopped after {tally.stopped_after}, down {tally.down_for:.1f}s, "
            f"restarted after {tally.restarted_after}; "
            f"retried {dict(tally.refused)} ({tally.during_outage} while down); "
            f"/readyz while down {tally.ready_while_down}, a write while down {tally.write_while_down}, "
            f"worker unavailable gauges {tally.worker_unavailable}; "
            f"all read back exactly once "
            f"{caught_up:.1f}s after the first post"
        )
        print(summary)
        LOGS.mkdir(parents=True, exist_ok=True)
        (LOGS / f"faults-{service_name}.txt").write_text(summary.strip() + "\n")  # for the closing notes
    finally:
        api.stop()
        worker.stop()
        if service.managed_pid() is None:
            service.start()  # later tests need the whole stack
    assert tally.posted == SUBJECTS * PER_SUBJECT
    assert STOP_AFTER <= tally.stopped_after <= tally.restarted_after < SUBJECTS * PER_SUBJECT
    assert tally.ready_while_down == [503]
    return tally


async def assert_archive_holds_every_exchange(settings: Settings, deadline: float) -> None:
    """The archive (MongoDB) has applied the whole threads topic and holds every exchange's three entries."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap)
    await consumer.start()
    try:
        partitions = [TopicPartition(settings.threads_topic, p) for p in range(settings.partitions)]
        ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
    client = mongo_client(settings.mongo)
    try:
        database = client[settings.mongo_db_name]
        while True:
            checkpoints = MongoCheckpoints(database, "archive")
            applied = {tp.partition: await checkpoints.applied("threads", tp.partition) for tp in partitions}
            if all(applied[tp.partition] >= ends[tp] - 1 for tp in partitions):
                break
            assert time.monotonic() < deadline, f"the archive stopped at {applied}, the log ends at {ends}"
            await asyncio.sleep(0.5)
        per_exchange: Counter[str] = Counter()
        async for group in database[GROUPS].find({"tenant": TENANT}, {"m": 1}):
            for doc in entry_docs(group):
                per_exchange[doc["exchange_id"]] += 1
        assert len(per_exchange) == SUBJECTS * PER_SUBJECT
        # question, tool call, answer: entries are keyed by what they are, so a retried produce the broker
        # had in fact taken adds none; never fewer
        assert all(count % 3 == 0 and count > 0 for count in per_exchange.values())
    finally:
        await client.drop_database(settings.mongo_db_name)
        await client.close()


@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_a_redis_outage_mid_stream_loses_and_doubles_nothing(stack: Settings, local_stack: LocalStack) -> None:
    tally = await stream_with_outage(
        unique_settings(stack, api_port=free_port(), worker_metrics_port=free_port()),
        local_stack,
        "redis",
        ("sessions",),
    )
    assert tally.worker_unavailable["sessions"] == "1.0" and tally.worker_unavailable["archive"] == "0.0"
    # idempotency keys are reserved in MongoDB and sealing keys come from MongoDB: writes need no Redis
    assert tally.write_while_down == [202]


@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_a_mongodb_outage_mid_stream_loses_and_doubles_nothing(stack: Settings, local_stack: LocalStack) -> None:
    tally = await stream_with_outage(
        unique_settings(stack, api_port=free_port(), worker_metrics_port=free_port()),
        local_stack,
        "mongo",
        ("archive",),
    )
    # The archive writes to MongoDB, so it waits. Sessions wait only if they must open a sealed event
    # whose key is not cached while MongoDB is away, which depends on how far behind they were when it
    # stopped (no new event arrives meanwhile: the API answers 503), so that is not asserted.
    assert tally.worker_unavailable["archive"] == "1.0"
    # the probe is a new subject: its data key cannot be cached, so the write waits for the vault (503)
    assert tally.write_while_down == [503]


@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_a_kafka_restart_mid_stream_loses_and_doubles_nothing(stack: Settings, local_stack: LocalStack) -> None:
    tally = await stream_with_outage(
        unique_settings(stack, api_port=free_port(), worker_metrics_port=free_port()), local_stack, "kafka"
    )
    assert tally.during_outage > 0  # writes were refused while the broker was down, and retried
    assert tally.write_while_down == [503]  # never a 500


def unavailable_gauge(metrics: str, projection: str) -> str | None:
    found = re.search(rf'memlog_projection_unavailable\{{projection="{projection}"\}} (\S+)', metrics)
    return found.group(1) if found else None


async def test_a_rebalance_while_redis_is_down_says_the_sessions_wait_for_it(
    stack: Settings, local_stack: LocalStack
) -> None:
    """A rebalance needs every projection's checkpoint before any agent runs again; while Redis is down the
    sessions' cannot be read, and no write of theirs is tried that would mark them waiting: the read must.

    The rebalance: a second worker of the group, started while Redis was up (a worker does not start
    without it), is killed once Redis is down, and its partitions move to the first after its session."""
    settings = unique_settings(stack, worker_metrics_port=free_port())
    await ensure_topics(settings)
    service = local_stack.service("redis")
    first = start_worker(settings, LOGS)
    # its own metrics port: the gauge read below is the first worker's
    second = start_worker(settings.model_copy(update={"worker_metrics_port": free_port()}), LOGS)
    metrics_url = f"http://127.0.0.1:{settings.worker_metrics_port}/metrics"
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            assert unavailable_gauge((await http.get(metrics_url)).text, "sessions") == "0.0"
            assert await asyncio.to_thread(service.stop), "redis was not stopped"
            # SIGKILL, no leaving: after its session the group rebalances, with nothing to apply and so
            # nothing to write that would notice the outage
            second.kill()
            deadline = time.monotonic() + GAUGE_BOUND
            while unavailable_gauge((await http.get(metrics_url)).text, "sessions") != "1.0":
                assert time.monotonic() < deadline, "the sessions never said they wait for Redis"
                await asyncio.sleep(0.5)
            assert await asyncio.to_thread(service.start), "redis was not started again"
            deadline = time.monotonic() + GAUGE_BOUND
            while unavailable_gauge((await http.get(metrics_url)).text, "sessions") != "0.0":
                assert time.monotonic() < deadline, "the sessions still said they wait once Redis was back"
                await asyncio.sleep(0.5)
    finally:
        if service.managed_pid() is None:
            service.start()  # later tests need the whole stack
        second.stop()
        first.stop()
