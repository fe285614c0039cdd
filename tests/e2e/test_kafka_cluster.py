"""memlog on a local 3-broker KRaft cluster (memlog.dev.localstack.kafka_cluster): its topics are created with
replication factor 3 and min.insync.replicas 2, and a broker killed mid-stream (SIGKILL) loses nothing
and doubles nothing.

300 exchanges (30 subjects x 10, below the fold) are recorded through the HTTP API, 30 at a time, each
with an idempotency key; an answer other than 202 (503 or 409 with Retry-After, or a dropped
connection) is retried with the same key. After 100 are accepted the broker leading partition 0 of
the threads topic is killed: a partition leader, so the producer's and the worker's requests to it
fail and move to the new leader (it may also be the quorum's active controller, a third of the time).
The stream goes on with two brokers, which min.insync.replicas=2 allows; after 200 the broker is
started again. Then every subject's context must hold its 10 exchanges exactly once, in order.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from memlog.config.settings import Settings
from memlog.dev.localstack.kafka_cluster import LocalKafkaCluster
from tests.e2e.conftest import LOGS, api_client, memlog, own_settings

pytestmark = pytest.mark.slow

TENANT = "replicated"
SUBJECTS = 30
PER_SUBJECT = 10
KILL_AFTER = 100
RESTART_AFTER = 200
BOUND = 300.0  # a bound on waiting (for the stream, the projections), not a timing check


@dataclass
class Tally:
    accepted: int = 0
    retried: Counter[str] = field(default_factory=Counter)
    last: dict[str, str] = field(default_factory=dict)  # the position of each subject's last exchange
    killed: int | None = None  # the node killed
    killed_after: int = -1
    restarted_after: int = -1


@pytest.fixture(scope="module")
def replicated(stack: Settings, kafka_cluster: LocalKafkaCluster) -> Iterator[Settings]:
    settings = own_settings(
        stack,
        kafka_bootstrap=kafka_cluster.bootstrap,
        replication=3,
        min_insync_replicas=2,
    )
    with memlog(settings):
        yield settings
    asyncio.run(_drop_topics(settings))


async def _drop_topics(settings: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap, request_timeout_ms=30000)
    try:
        await admin.start()
        await admin.delete_topics([*settings.subject_topics, settings.deadletter_topic])
    finally:
        await admin.close()


async def post(http: httpx.AsyncClient, body: dict[str, Any], tally: Tally) -> str:
    """POST until accepted, with the same idempotency key; a refusal says when to retry."""
    deadline = time.monotonic() + BOUND
    while True:
        assert time.monotonic() < deadline, f"{body['exchange_id']} was never accepted: {dict(tally.retried)}"
        try:
            response = await http.post("/v1/exchanges", json=body)
        except httpx.TransportError as exc:
            tally.retried[type(exc).__name__] += 1
            continue
        if response.status_code == 202:
            tally.accepted += 1
            return str(response.json()["position"])
        assert response.status_code in (503, 409), f"{response.status_code}: {response.text}"
        tally.retried[str(response.status_code)] += 1
        await asyncio.sleep(float(response.headers.get("retry-after", "1")))


def exchange(subject: str, number: int) -> dict[str, Any]:
    exchange_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{TENANT}/{subject}/{number}"))
    return {
        "tenant": TENANT,
        "subject": subject,
        "exchange_id": exchange_id,
        "idempotency_key": exchange_id,
        "question": f"{subject} q{number}",
        "tool_calls": [{"name": "count", "arguments": {"n": number}, "result": number}],
        "answer": f"a{number}",
    }


async def leader_of_first_partition(settings: Settings) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap, request_timeout_ms=15000)
    try:
        await admin.start()
        [described] = await admin.describe_topics([settings.threads_topic])
    finally:
        await admin.close()
    return next(int(p["leader"]) for p in described["partitions"] if p["partition"] == 0)


async def stream_with_a_broker_killed(settings: Settings, cluster: LocalKafkaCluster, tally: Tally) -> None:
    async with api_client(settings) as http:

        async def record(subject: str) -> None:
            for number in range(PER_SUBJECT):
                tally.last[subject] = await post(http, exchange(subject, number), tally)

        async def kill_then_restart() -> None:
            while tally.accepted < KILL_AFTER:
                await asyncio.sleep(0.05)
            victim = await leader_of_first_partition(settings)
            await asyncio.to_thread(cluster.node(victim).kill)
            tally.killed, tally.killed_after = victim, tally.accepted
            while tally.accepted < RESTART_AFTER:
                await asyncio.sleep(0.05)
            tally.restarted_after = tally.accepted
            await asyncio.to_thread(cluster.node(victim).start)

        chaos = asyncio.create_task(kill_then_restart())
        await asyncio.gather(*(record(f"s{n:02d}") for n in range(SUBJECTS)))
        await asyncio.wait_for(chaos, BOUND)  # the restart may outlast the stream


async def test_a_broker_killed_mid_stream_loses_and_doubles_nothing(
    replicated: Settings, kafka_cluster: LocalKafkaCluster
) -> None:
    tally = Tally()
    started = time.monotonic()
    await stream_with_a_broker_killed(replicated, kafka_cluster, tally)
    streamed = time.monotonic() - started
    assert tally.accepted == SUBJECTS * PER_SUBJECT
    assert KILL_AFTER <= tally.killed_after < tally.restarted_after < SUBJECTS * PER_SUBJECT, tally

    async with api_client(replicated) as http:
        for subject, last in sorted(tally.last.items()):
            read = await http.get(
                f"/v1/tenants/{TENANT}/subjects/{subject}/context", params={"after": last, "wait": 30}
            )
            assert read.status_code == 200, read.text
            exchanges = read.json()["exchanges"]
            assert [e["question"] for e in exchanges] == [f"{subject} q{n}" for n in range(PER_SUBJECT)], subject
            assert [e["exchange_id"] for e in exchanges] == [
                exchange(subject, n)["exchange_id"] for n in range(PER_SUBJECT)
            ], subject
    caught_up = time.monotonic() - started

    summary = (
        f"\nkafka cluster: {tally.accepted} exchanges accepted in {streamed:.1f}s; broker {tally.killed} "
        f"(leader of {replicated.threads_topic}[0]) killed after {tally.killed_after}, started again after "
        f"{tally.restarted_after}; retried {dict(tally.retried)}; all read back exactly once {caught_up:.1f}s "
        "after the first post"
    )
    print(summary)
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / "kafka-cluster.txt").write_text(summary.strip() + "\n")


async def test_memlogs_topics_are_replicated_three_times_and_need_two_in_sync(
    replicated: Settings, kafka_cluster: LocalKafkaCluster
) -> None:
    topics = [*replicated.subject_topics, replicated.deadletter_topic]
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap, request_timeout_ms=15000)
    try:
        await admin.start()
        described = await admin.describe_topics(topics)
        configs = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, {"min.insync.replicas": None}) for name in topics]
        )
    finally:
        await admin.close()
    assert sorted(t["topic"] for t in described) == sorted(topics)
    for topic in described:
        assert len(topic["partitions"]) == replicated.partitions, topic["topic"]
        assert all(len(p["replicas"]) == 3 for p in topic["partitions"]), topic
    found = {
        resource["resource_name"]: {e["config_names"]: e["config_value"] for e in resource["config_entries"]}
        for response in configs
        for resource in response.to_object()["resources"]
    }
    assert found == {name: {"min.insync.replicas": "2"} for name in topics}
