"""One exchange's trace across the hop, read from an in-memory exporter: the API's request span, the
produce span under it, and the worker's apply span under that, linked by the traceparent header the
record carries. And /metrics counts requests by route template, never naming a tenant or subject."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from memlog.api import create_api
from memlog.config.settings import Settings
from memlog.services import open_services
from streams.metrics import Metrics
from streams.projector import Record
from streams.projectors import build_projections
from streams.sealer import Sealer
from streams.topics import ensure_topics
from tests.conftest import unique_settings

TENANT, SUBJECT = "tracing-tenant-x7", "tracing-subject-q9"


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # this process's spans, in memory: the API's and the worker's alike
    yield exporter
    provider.shutdown()


class NoDeadLetters:
    async def send(self, key: bytes | None, value: bytes) -> None:
        raise AssertionError(f"a dead letter: {value[:200]!r}")


async def threads_records(settings: Settings) -> list[Record]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(settings.threads_topic, p) for p in range(settings.partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        records: list[Record] = []
        left = {tp for tp in partitions if ends[tp] > 0}
        while left:
            for fetched in (await consumer.getmany(timeout_ms=1000)).values():
                records += [Record(r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in fetched]
            left = {tp for tp in left if await consumer.position(tp) < ends[tp]}
        return records
    finally:
        await consumer.stop()


def one(found: Sequence[ReadableSpan], name: str, kind: SpanKind) -> ReadableSpan:
    named = [span for span in found if span.name == name and span.kind == kind]
    assert len(named) == 1, [(span.name, span.kind) for span in found]
    return named[0]


def ancestors(span: ReadableSpan, found: Sequence[ReadableSpan]) -> list[int]:
    """The span ids above `span`, nearest first (FastAPI's own spans may sit in between)."""
    by_id = {s.context.span_id: s for s in found}
    chain: list[int] = []
    while span.parent is not None:
        chain.append(span.parent.span_id)
        if span.parent.span_id not in by_id:
            break
        span = by_id[span.parent.span_id]
    return chain


async def test_a_span_tree_links_the_request_the_produce_and_the_workers_apply(
    stack: Settings, spans: InMemorySpanExporter
) -> None:
    settings = unique_settings(stack)
    await ensure_topics(settings)
    app = create_api(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memlog") as http,
    ):
        body = {"tenant": TENANT, "subject": SUBJECT, "question": "is the trace whole?", "answer": "yes"}
        accepted = await http.post("/v1/exchanges", json=body)
        assert accepted.status_code == 202, accepted.text
        records = await threads_records(settings)
        assert len(records) == 2 and all(dict(r.headers).get("traceparent") for r in records)
        # the worker's apply: the projector the worker runs, fed the records as its agent hands them over
        async with open_services(settings) as services:
            built = build_projections(
                settings,
                codec=services.codec,
                sealer=Sealer(services.vault),
                stores=services.current,
                dead_letters=NoDeadLetters(),
                metrics=Metrics(),
                which=("sessions",),
            )
            await built.prepare()
            for _, projector in built.projectors:
                await projector.handle(records)
        context = await http.get(
            f"/v1/tenants/{TENANT}/subjects/{SUBJECT}/context", params={"after": accepted.json()["position"]}
        )
        assert [e["question"] for e in context.json()["exchanges"]] == ["is the trace whole?"]
        metrics = (await http.get("/metrics")).text

    found = spans.get_finished_spans()
    request = one(found, "POST /v1/exchanges", SpanKind.SERVER)
    produce = one(found, f"produce {settings.threads_topic}", SpanKind.PRODUCER)
    applied = [span for span in found if span.name == "apply sessions"]
    assert request.parent is None  # the root: the backend sent no traceparent
    assert request.context.span_id in ancestors(produce, found)
    assert len(applied) == 2  # the question and the answer, each applied under the produce that sent it
    for span in applied:
        assert span.parent is not None and span.parent.span_id == produce.context.span_id
        assert span.context.trace_id == request.context.trace_id

    assert 'memlog_http_requests_total{method="POST",route="/v1/exchanges",status="202"} 1.0' in metrics
    assert 'route="/v1/tenants/{tenant}/subjects/{subject}/context",status="200"' in metrics, [
        line for line in metrics.splitlines() if "http_requests_total{" in line
    ]
    assert TENANT not in metrics and SUBJECT not in metrics
