"""Prometheus metrics of the API and the workers, in a registry of their own (nothing at import time)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

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
        # by route template (/v1/tenants/{tenant}/...), never by path: a path names tenants and subjects
        self.http_requests = Counter(
            "memlog_http_requests", "API requests answered.", ["method", "route", "status"], registry=self.registry
        )
        self.http_seconds = Histogram(
            "memlog_http_request_seconds",
            "Latency of an API request, to its answer's last byte.",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.shredded = Counter(
            "memlog_shredded_events",
            "Events skipped because their subject was erased (their data key is gone).",
            ["projection"],
            registry=self.registry,
        )
        self.expired = Counter(
            "memlog_expired_events",
            "Events skipped because the key of their period was shredded on schedule (projections.periods).",
            ["projection"],
            registry=self.registry,
        )
        self.period_keys_shredded = Counter(
            "memlog_period_keys_shredded",
            "Period keys of subjects deleted by the worker's schedule once their records were needed no more.",
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
        self.compacted = Gauge(
            "memlog_storage_compacted_timestamp_seconds",
            "When the storage engines' files were last rewritten after erasures or purges (unix seconds; 0: "
            "not since this worker started and none in the ledger). MEMLOG_COMPACT_AFTER_SECONDS bounds the wait.",
            registry=self.registry,
        )
        self.watchdog = Counter(
            "memlog_watchdog_actions",
            "What a worker's watchdog did about a stall: restart (its consumer) or exit (for a supervisor to restart).",
            ["action"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))

    def serve(
        self, port: int, host: str = "127.0.0.1", liveness: Callable[[], tuple[bool, dict[str, Any]]] | None = None
    ) -> None:
        """The worker's HTTP endpoint, on a thread of its own: /metrics, and /healthz answering `liveness`.

        /healthz answers 200 or 503 with the liveness detail as JSON. It runs outside the event loop
        on purpose: a worker whose loop is stuck must still be able to say so.
        """
        render = self.render

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._answer(200, render(), CONTENT_TYPE_LATEST)
                elif path == "/healthz" and liveness is not None:
                    alive, detail = liveness()
                    self._answer(200 if alive else 503, json.dumps(detail).encode(), "application/json")
                else:
                    self._answer(404, b"not found\n", "text/plain")

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Probes every few seconds would flood the log."""

        server = ThreadingHTTPServer((host, port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="memlog-metrics", daemon=True).start()
