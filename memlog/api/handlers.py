"""memlog's errors as HTTP answers, all in one place: status, body and headers."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from schemas.errors import (
    Conflict,
    Forbidden,
    InvalidEvent,
    KeyReused,
    LogUnavailable,
    NotCaughtUp,
    NotFound,
    NothingToDo,
    StoreUnavailable,
    SubjectErasing,
    TargetExists,
    Unauthorized,
)

log = logging.getLogger(__name__)

# Sent with every 503 (the log or a store is away, a read has not caught up, an erasure is running) and
# with the 409 of an idempotency key that another attempt holds (memlog/app/exchanges.py: how long it can).
RETRY_AFTER_SECONDS = "2"
RETRY = {"Retry-After": RETRY_AFTER_SECONDS}
ECHO_CHARS = 200  # a refusal quotes at most this much of a text it was sent
ECHO_DEPTH = 8  # ... and this deep into a value


class Refusal(JSONResponse):
    """A JSON answer that always encodes: ASCII escapes (a lone surrogate stays an escape), and what
    was sent echoed back cut short, non-finite numbers and bytes as text."""

    def render(self, content: Any) -> bytes:
        return json.dumps(echo(content), ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def echo(value: Any, depth: int = 0) -> Any:
    """What a refusal may safely quote of its input."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value if len(value) <= ECHO_CHARS else value[:ECHO_CHARS] + "..."
    if isinstance(value, bytes | bytearray):
        return echo(bytes(value[: ECHO_CHARS + 1]).decode("utf-8", "replace"), depth)
    if depth >= ECHO_DEPTH:
        return "..."
    if isinstance(value, Mapping):
        return {str(echo(k, depth + 1)): echo(v, depth + 1) for k, v in list(value.items())[:ECHO_CHARS]}
    if isinstance(value, Sequence):
        return [echo(v, depth + 1) for v in list(value)[:ECHO_CHARS]]
    return echo(str(value), depth)


# Each refusal's `type`, as FastAPI's own validation errors carry one (a client may branch on it).
KINDS = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "value_error",
    500: "internal",
    503: "unavailable",
}

# Where a request carried a field: "path", "query" or "body" (the `loc` of its refusal starts with it).
Where = Callable[[str], str]


def in_body(_: str) -> str:
    return "body"


def where_in(path: Collection[str], query: Collection[str]) -> Where:
    """A field named by a check is the path's or the query's parameter of that name, else the body's."""

    def where(field: str) -> str:
        head = field.split(".", 1)[0]
        return "path" if head in path else "query" if head in query else "body"

    return where


def problem(status: int, loc: list[str | int], message: str) -> dict[str, Any]:
    """One item of a refusal's `detail`: FastAPI's shape (`loc`, `msg`, `type`)."""
    return {"loc": loc, "msg": message, "type": KINDS.get(status, "error")}


def error(status: int, field: str | None, message: str, retry: bool = False, where: Where = in_body) -> JSONResponse:
    """The shape of FastAPI's own validation errors, so clients read every refusal one way."""
    loc: list[str | int] = [where(field), field] if field else []
    body: dict[str, Any] = {"detail": [problem(status, loc, message)]}
    return Refusal(body, status_code=status, headers=RETRY if retry else None)


def unauthorized(exc: Unauthorized) -> JSONResponse:
    return Refusal(
        {"detail": [problem(401, ["header", "authorization"], str(exc))]},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


def _validation(exc: RequestValidationError, _: Where) -> JSONResponse:
    return Refusal({"detail": exc.errors()}, status_code=422)


def _forbidden(exc: Forbidden, _: Where) -> JSONResponse:
    return Refusal({"detail": [problem(403, ["header", "authorization"], str(exc))]}, status_code=403)


def _unavailable(exc: Exception, _: Where) -> JSONResponse:
    return error(503, None, str(exc), retry=True)


# Every refusal memlog makes on purpose, by the exception that carries it.
ANSWERS: dict[type[Exception], Callable[[Any, Where], JSONResponse]] = {
    RequestValidationError: _validation,
    InvalidEvent: lambda exc, where: error(422, exc.field, exc.problem, where=where),
    Unauthorized: lambda exc, _: unauthorized(exc),
    Forbidden: _forbidden,
    Conflict: lambda exc, _: error(409, None, str(exc), retry=True),
    KeyReused: lambda exc, where: error(409, "idempotency_key", str(exc), where=where),
    TargetExists: lambda exc, where: error(409, "target", str(exc), where=where),
    NothingToDo: lambda exc, _: error(409, None, str(exc)),
    NotFound: lambda exc, _: error(404, None, str(exc)),
    LogUnavailable: _unavailable,
    StoreUnavailable: _unavailable,
    SubjectErasing: _unavailable,
    NotCaughtUp: _unavailable,
}


def answer_for(exc: Exception, where: Where = in_body) -> JSONResponse | None:
    """The refusal for `exc`, found as Starlette finds a handler (the nearest class in its MRO); None
    for an exception memlog does not raise on purpose (a bug)."""
    for kind in type(exc).__mro__:
        make = ANSWERS.get(kind)
        if make is not None:
            return make(exc, where)
    return None


def _handler(make: Callable[[Any, Where], JSONResponse]) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    async def handle(request: Request, exc: Exception) -> JSONResponse:
        return make(exc, where_in(request.path_params, request.query_params))

    return handle


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(app: Any, scope: Mapping[str, Any]) -> list[str]:
    """Every method some route of `app` takes at the scope's path (FastAPI makes a route of each
    method, and Starlette's 405 names only the first route's)."""
    return [
        method
        for method in METHODS
        if any(route.matches({**scope, "method": method})[0] == Match.FULL for route in app.router.routes)
    ]


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own refusals (no such path, a method the path does not take) in memlog's shape; a 405
    lists in `Allow` every method the path takes."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 405:
        allowed = allowed_methods(request.app, request.scope)
        message = f"{request.method} is not a method of this path; it takes {', '.join(allowed)}"
        body = {"detail": [problem(405, [], message)]}
        return Refusal(body, status_code=405, headers={"Allow": ", ".join(allowed)})
    body = {"detail": [problem(exc.status_code, [], str(exc.detail))]}
    return Refusal(body, status_code=exc.status_code, headers=exc.headers)


def install(app: FastAPI) -> None:
    for kind, make in ANSWERS.items():
        app.add_exception_handler(kind, _handler(make))
    app.add_exception_handler(StarletteHTTPException, _http_error)

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        # everything memlog refuses on purpose is mapped above: what lands here is a bug, logged whole
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return error(500, None, "internal error: the API log has the details")
