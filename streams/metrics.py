"""Prometheus metrics of the API and the workers, in a registry of their own (nothing at import time)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, start_http_server

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.applied = Counter(
            "memlog_events_applied", "Events applied to a projection.", ["projection"], registry=self.registry
        )
        self.dead_letters = Counter(
            "memlog_dead_letters",
            "Records sent to the dead-letter topic.",
            ["projection", "topic"],
            registry=self.registry,
        )
        self.lag = Gauge(
            "memlog_consumer_lag",
            "Records on a partition not yet applied by a projection.",
            ["projection", "topic", "partition"],
            registry=self.registry,
        )
        self.folds = Counter(
            "memlog_folds", "Threads folded into a summary.", ["summarizer", "urgent"], registry=self.registry
        )
        self.fold_seconds = Histogram(
            "memlog_summarizer_seconds",
            "Time a summarizer took for one fold.",
            ["summarizer"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.context_seconds = Histogram(
            "memlog_context_seconds",
            "Latency of a context read.",
            ["thread"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.recall_seconds = Histogram(
            "memlog_recall_seconds", "Latency of a fact recall.", buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.erasures = Counter("memlog_erasures", "Subjects erased.", registry=self.registry)
        self.shredded = Counter(
            "memlog_shredded_events",
            "Events skipped because their subject was erased (their data key is gone).",
            ["projection"],
            registry=self.registry,
        )
        self.unavailable = Gauge(
            "memlog_projection_unavailable",
            "1 while a projection cannot reach its store or the log and retries, committing nothing.",
            ["projection"],
            registry=self.registry,
        )
        self.stalled = Gauge(
            "memlog_projection_stalled",
            "1 while a projection holds a lag and has applied nothing for longer than the bound "
            "(MEMLOG_READY_STALL_SECONDS in the API, MEMLOG_WATCHDOG_SECONDS in a worker).",
            ["projection"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """An HTTP endpoint for the worker's metrics (the API serves them at /metrics itself)."""
        start_http_server(port, addr=host, registry=self.registry)
