"""OpenTelemetry traces across the hop: the API's request span, the produce span as its child, and the
worker's apply span as the produce's child, linked through a `traceparent` header on each Kafka record.

Exporters are off unless configured (MEMLOG_OTEL_EXPORTER): with none, the tracer is OpenTelemetry's
no-op one, spans record nothing and records carry no header (unless the request brought a traceparent,
which is passed on). A process (or a test) that installs its own tracer provider gets every span.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from memlog.config.settings import Settings

PROPAGATOR = TraceContextTextMapPropagator()
HEADERS = ("traceparent", "tracestate")
Headers = Sequence[tuple[str, bytes]]


def tracer() -> Tracer:
    return trace.get_tracer("memlog")


def setup_tracing(settings: Settings, service: str) -> None:
    """The process's tracer provider, when an exporter is configured; otherwise nothing at all."""
    if settings.otel_exporter == "none":
        return
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": f"memlog-{service}"}))
    provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)


def trace_headers(span: trace.Span) -> list[tuple[str, bytes]]:
    """`span`'s context as Kafka record headers (none when nothing is traced)."""
    carrier: dict[str, str] = {}
    PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return [(name, value.encode("ascii")) for name, value in carrier.items()]


def context_from(headers: Any) -> Context | None:
    """The trace context a record (or a request) carries; None without a traceparent."""
    carrier: dict[str, str] = {}
    for name, value in headers or ():
        key = name.decode("latin-1").lower() if isinstance(name, bytes) else str(name).lower()
        if key in HEADERS and isinstance(value, bytes | str):
            carrier[key] = value.decode("latin-1") if isinstance(value, bytes) else value
    return PROPAGATOR.extract(carrier) if "traceparent" in carrier else None


@contextmanager
def applying(projection: str, topic: str, records: Sequence[Any]) -> Iterator[None]:
    """One span per traced record of a batch, each the child of the produce that sent it, open while
    the batch is applied."""
    spans = []
    for record in records:
        parent = context_from(record.headers)
        if parent is None:
            continue
        span = tracer().start_span(f"apply {projection}", context=parent, kind=SpanKind.CONSUMER)
        span.set_attribute("messaging.destination.name", topic)
        span.set_attribute("messaging.kafka.partition", record.partition)
        span.set_attribute("messaging.kafka.offset", record.offset)
        spans.append(span)
    try:
        yield
    finally:
        for span in spans:
            span.end()
