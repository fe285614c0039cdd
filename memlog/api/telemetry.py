"""The API's HTTP metrics, by the route's template, never by the path (a path names tenants and subjects).
The request's span is FastAPI's own (its native telemetry: a server span named by the route template, the
child of the caller's traceparent), the root of an exchange's trace when the backend sent none."""

from __future__ import annotations

import time
from typing import Any

from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlog.api.shortcut import ROUTE_TEMPLATE
from streams.metrics import Metrics

UNMATCHED = "unmatched"  # a path no route takes (404): one series, whatever was asked


def route_template(app: Any, scope: Scope) -> str:
    """The template of the route that served the request; found again for a request refused before routing."""
    route = scope.get("route")
    if route is not None and hasattr(route, "path"):
        return str(route.path)
    if ROUTE_TEMPLATE in scope:
        return str(scope[ROUTE_TEMPLATE])
    for candidate in app.routes:
        if candidate.matches(scope)[0] == Match.FULL and hasattr(candidate, "path"):
            return str(candidate.path)
    return UNMATCHED


class HttpMetrics:
    """Args:
    app: the application, outermost, so refusals before routing are counted too.
    router_app: the FastAPI app whose routes name the templates.
    metrics: where the request counts and latencies go.
    """

    def __init__(self, app: ASGIApp, router_app: Any, metrics: Metrics) -> None:
        self.app = app
        self.router_app = router_app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method: str = scope["method"]
        status = 500
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = route_template(self.router_app, scope)
            self.metrics.http_requests.labels(method, route, str(status)).inc()
            self.metrics.http_seconds.labels(method, route).observe(time.perf_counter() - started)
