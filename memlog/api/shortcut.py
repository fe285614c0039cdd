"""The context reads' short way through the API (issue 16).

An agent's backend reads a context before every answer, so that read is the API's hottest path; FastAPI's
routing, dependency solving and exception layers cost about as much as the read itself. This ASGI
middleware serves a plain GET of the three context routes (memlog/api/routers/context.py) directly:
the same credential check, the same service call, the same response and the same refusals
(memlog/api/handlers.py). Anything it is not sure to answer exactly as the route would (a query
parameter given twice, a `wait` or `fill` that is not plainly valid, a root path) goes on to FastAPI,
which stays the one description of these routes (OpenAPI) and answers the rest.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import NamedTuple
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from memlog.api.context_json import context_answer
from memlog.api.handlers import answer_for, where_in
from memlog.app.context import ReadyContext
from memlog.app.credentials import Credentials
from memlog.services import Services

ROUTE_TEMPLATE = "memlog.route_template"
PREFIX = "/v1/tenants/"
SUFFIX = "/context"
# A `wait` FastAPI takes as it is written (a finite, non-negative float); any other is left to FastAPI.
PLAIN_WAIT = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9})?")
SESSION = frozenset({"after", "wait", "question", "agent", "fill"})
THREAD = frozenset({"after", "wait"})
PATH_PARAMETER = re.compile(r"{(\w+)}")  # a parameter of a route's path template

Read = Callable[[Services, dict[str, str], float | None], Awaitable[ReadyContext]]


def _session(tenant: str, subject: str) -> Read:
    def read(services: Services, query: dict[str, str], wait: float | None) -> Awaitable[ReadyContext]:
        return services.contexts.ready_session(
            tenant,
            subject,
            question=query.get("question"),
            agent=query.get("agent"),
            after=query.get("after"),
            wait=wait,
            fill=query.get("fill") == "recent",
        )

    return read


def _public(tenant: str) -> Read:
    def read(services: Services, query: dict[str, str], wait: float | None) -> Awaitable[ReadyContext]:
        return services.contexts.ready_public(tenant, after=query.get("after"), wait=wait)

    return read


def _automation(tenant: str, agent: str) -> Read:
    def read(services: Services, query: dict[str, str], wait: float | None) -> Awaitable[ReadyContext]:
        return services.contexts.ready_automation(tenant, agent, after=query.get("after"), wait=wait)

    return read


class Found(NamedTuple):
    template: str  # the route's path, as declared in memlog/api/routers/context.py
    tenant: str
    names: frozenset[str]  # the query parameters it declares
    read: Read


def route(path: str) -> Found | None:
    """The context route a path names (each parameter of the path one non-empty segment, as Starlette
    matches `{name}`), or None."""
    if not (path.startswith(PREFIX) and path.endswith(SUFFIX)):
        return None
    parts = path[len(PREFIX) : -len(SUFFIX)].split("/")
    if not all(parts):
        return None
    tenant = parts[0]
    if len(parts) == 2 and parts[1] == "public":
        return Found("/v1/tenants/{tenant}/public/context", tenant, THREAD, _public(tenant))
    if len(parts) == 3 and parts[1] == "subjects":
        return Found("/v1/tenants/{tenant}/subjects/{subject}/context", tenant, SESSION, _session(tenant, parts[2]))
    if len(parts) == 3 and parts[1] == "agents":
        return Found("/v1/tenants/{tenant}/agents/{agent}/context", tenant, THREAD, _automation(tenant, parts[2]))
    return None


def plain_query(raw: bytes, names: frozenset[str]) -> tuple[dict[str, str], float | None] | None:
    """The route's query parameters, parsed as Starlette parses them; None when one of them would need
    FastAPI's own validation (given twice, or a `wait` or `fill` that is not plainly valid)."""
    query: dict[str, str] = {}
    for name, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
        if name not in names:
            continue  # FastAPI ignores a parameter the route does not declare
        if name in query:
            return None
        query[name] = value
    if query.get("fill", "recent") != "recent":
        return None
    wait = query.get("wait")
    if wait is None:
        return query, None
    if PLAIN_WAIT.fullmatch(wait) is None:
        return None
    return query, float(wait)


class ContextShortcut:
    """Serves the context routes' plain GETs; every other request goes on to `app` unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope.get("root_path"):
            await self.app(scope, receive, send)
            return
        found = route(scope["path"])
        parsed = None if found is None else plain_query(scope["query_string"], found.names)
        if found is None or parsed is None:
            await self.app(scope, receive, send)
            return
        query, wait = parsed
        scope[ROUTE_TEMPLATE] = found.template  # for the HTTP metrics: this request never reaches a route
        state = scope["app"].state
        try:
            credentials: Credentials = state.credentials
            credentials.check(header(scope, b"authorization"), found.tenant)
            services: Services = state.services
            response = context_answer(header(scope, b"if-none-match"), await found.read(services, query, wait))
        except Exception as exc:
            refusal = answer_for(exc, where_in(PATH_PARAMETER.findall(found.template), query))
            if refusal is None:
                raise  # a bug: the app's error middleware logs it and answers 500, as for any route
            await refusal(scope, receive, send)
            return
        await response(scope, receive, send)


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of a header, as Starlette's `Headers.get` gives it (ASGI names are lower case)."""
    for key, value in scope["headers"]:
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None
