"""HTTP -> Kafka -> Faust -> Redis -> HTTP, with memlog's own worker and API processes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from memlog.config.settings import Settings
from memlog.dev.processes import free_port
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import now_ms
from tests.e2e.conftest import StartMemlog
from tests.kafka import consume_all, end_offsets


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog(worker_metrics_port=free_port())


def chest(subject: str) -> dict[str, Any]:
    """An exchange with a tool result; each test uses a subject of its own on the shared worker."""
    return {**CHEST, "subject": subject}


CHEST = {
    "tenant": "castle-eu-1",
    "subject": "steve",
    "question": "what is in the chest at 10 64 -3?",
    "tool_calls": [
        {
            "name": "open_chest",
            "arguments": {"x": 10, "y": 64, "z": -3},
            "result": {"items": [{"name": "diamond", "count": 12}, {"name": "torch", "count": 3}]},
            "ok": True,
            "duration_ms": 35,
        }
    ],
    "answer": "12 diamonds and 3 torches.",
    "channel": "v2",
}


async def test_a_recorded_exchange_is_in_the_context_with_its_tool_results(http: httpx.AsyncClient) -> None:
    accepted = await http.post("/v1/exchanges", json=chest("steve-1"))
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    context = await http.get("/v1/tenants/castle-eu-1/subjects/steve-1/context", params={"after": body["position"]})
    assert context.status_code == 200, context.text
    ctx = context.json()
    (exchange,) = ctx["exchanges"]
    assert exchange["exchange_id"] == body["exchange_id"]
    # "how many were in that chest?" is answerable without another call
    assert exchange["tool_calls"][0]["result"]["items"][0] == {"name": "diamond", "count": 12}
    assert exchange["answer"] == CHEST["answer"] and exchange["complete"] is True
    assert ctx["tokens"] > 0 and ctx["facts"] == [] and ctx["summary"] == ""


async def test_the_same_subject_in_another_tenant_sees_nothing(http: httpx.AsyncClient) -> None:
    accepted = (await http.post("/v1/exchanges", json=chest("steve-2"))).json()
    other = await http.get("/v1/tenants/castle-us-2/subjects/steve-2/context", params={"after": accepted["position"]})
    assert other.json()["exchanges"] == []


async def test_a_streamed_exchange_shows_incomplete_until_its_answer(http: httpx.AsyncClient) -> None:
    route = {"tenant": "t", "subject": "alex"}
    asked = (await http.post("/v1/exchanges/ex-42/question", json={**route, "question": "where is my base?"})).json()
    ctx = (await http.get("/v1/tenants/t/subjects/alex/context", params={"after": asked["position"]})).json()
    assert ctx["exchanges"][0]["complete"] is False
    await http.post(
        "/v1/exchanges/ex-42/tool-calls", json={**route, "call_index": 0, "name": "find_base", "result": {"x": 100}}
    )
    answered = (await http.post("/v1/exchanges/ex-42/answer", json={**route, "answer": "at x=100"})).json()
    ctx = (await http.get("/v1/tenants/t/subjects/alex/context", params={"after": answered["position"]})).json()
    (exchange,) = ctx["exchanges"]
    assert exchange["complete"] is True and exchange["tool_calls"][0]["result"] == {"x": 100}


async def test_a_retried_exchange_with_its_idempotency_key_is_recorded_once(http: httpx.AsyncClient) -> None:
    payload = {**chest("steve-3"), "idempotency_key": "req-1"}
    first = (await http.post("/v1/exchanges", json=payload)).json()
    second = (await http.post("/v1/exchanges", json=payload)).json()
    assert second == {**first, "idempotent": True}
    ctx = await http.get("/v1/tenants/castle-eu-1/subjects/steve-3/context", params={"after": first["position"]})
    assert len(ctx.json()["exchanges"]) == 1


async def test_invalid_input_answers_422_naming_the_field_and_produces_nothing(
    http: httpx.AsyncClient, live: Settings
) -> None:
    cases = [
        ({**CHEST, "subject": ""}, "subject"),
        ({**CHEST, "channel": "v7"}, "channel"),
        ({**CHEST, "tool_calls": [{"arguments": {}}]}, "name"),
        ({k: v for k, v in CHEST.items() if k != "question"}, "question"),
        ({**CHEST, "tenant": "bad\u0007name"}, "tenant"),
        ({**CHEST, "occurred_at": now_ms() + 3 * 86_400_000}, "occurred_at"),  # the broker refuses it
    ]
    before = await end_offsets(live)
    for payload, field in cases:
        response = await http.post("/v1/exchanges", json=payload)
        assert response.status_code == 422, payload
        assert field in str(response.json()["detail"][0]["loc"]), response.text
    assert await end_offsets(live) == before
    bad_token = await http.get("/v1/tenants/t/subjects/s/context", params={"after": "nonsense"})
    assert bad_token.status_code == 422 and "after" in bad_token.text


async def test_a_read_after_a_position_never_applied_answers_503_with_retry_after(http: httpx.AsyncClient) -> None:
    response = await http.get("/v1/tenants/t/subjects/s/context", params={"after": "threads.0.999999", "wait": 1})
    assert response.status_code == 503
    assert response.headers["retry-after"]


async def test_garbage_on_the_threads_topic_is_dead_lettered_and_the_next_exchange_projected(
    http: httpx.AsyncClient, live: Settings
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=live.bootstrap, acks="all")
    await producer.start()
    before = (await http.get("/readyz")).json()["dead_letters"].get(live.threads_topic, 0)
    garbage = b"\xde\xad not avro at all"
    from schemas.events import record_key

    meta = await producer.send_and_wait(live.threads_topic, garbage, key=record_key("castle-eu-1", "steve-4"))
    await producer.stop()
    accepted = (await http.post("/v1/exchanges", json=chest("steve-4"))).json()
    assert accepted["position"].split(".")[1] == str(meta.partition)  # same partition, after the poison
    ctx = await http.get("/v1/tenants/castle-eu-1/subjects/steve-4/context", params={"after": accepted["position"]})
    assert ctx.status_code == 200 and len(ctx.json()["exchanges"]) == 1
    letters = await consume_all(live, live.deadletter_topic, 3)
    codec = Codec(Catalog())
    decoded = [codec.decode(value).record for *_, value in letters]
    assert {d["consumer"] for d in decoded} == {"sessions", "archive", "facts-activity"}
    for letter in decoded:
        assert letter["value"] == garbage
        assert (letter["source_partition"], letter["source_offset"]) == (meta.partition, meta.offset)
        assert "not a memlog event" in letter["error"]
    ready = (await http.get("/readyz")).json()
    assert ready["dead_letters"] == {live.threads_topic: before + 3}


async def test_health_and_openapi(http: httpx.AsyncClient) -> None:
    assert (await http.get("/healthz")).json() == {"status": "alive"}
    spec = (await http.get("/openapi.json")).json()
    assert "/v1/exchanges" in spec["paths"]
    assert "/v1/tenants/{tenant}/subjects/{subject}/context" in spec["paths"]
    # every projection (sessions, archive, facts-activity, facts, traces, privacy) catches up with the log
    deadline = time.monotonic() + 60
    while (ready := await http.get("/readyz")).status_code != 200 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert {name.split("/")[0] for name in ready.json()["lag"]} == {
        "sessions",
        "facts-activity",
        "archive",
        "facts",
        "traces",
        "privacy",
    }


async def test_the_api_and_the_worker_export_prometheus_metrics(http: httpx.AsyncClient, live: Settings) -> None:
    accepted = (await http.post("/v1/exchanges", json=chest("steve-metrics"))).json()
    await http.get("/v1/tenants/castle-eu-1/subjects/steve-metrics/context", params={"after": accepted["position"]})
    api = (await http.get("/metrics")).text
    assert 'memlog_context_seconds_count{thread="session"}' in api
    assert "memlog_recall_seconds_count" in api
    assert 'memlog_consumer_lag{partition="0",projection="sessions",topic="threads"}' in api
    async with httpx.AsyncClient(timeout=10) as client:
        worker = (await client.get(f"http://127.0.0.1:{live.worker_metrics_port}/metrics")).text
    applied = [
        line for line in worker.splitlines() if line.startswith('memlog_events_applied_total{projection="sessions"}')
    ]
    assert applied and float(applied[0].split()[-1]) >= 2
