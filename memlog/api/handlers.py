"""memlog's errors as HTTP answers, all in one place: status, body and headers."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

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
# with the 409 of an idempotency key that another attempt holds (memlog/exchanges.py: how long it can).
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


def error(status: int, field: str | None, message: str, retry: bool = False) -> JSONResponse:
    """The shape of FastAPI's own validation errors, so clients read every refusal one way."""
    body: dict[str, Any] = {"detail": [{"loc": ["body", field] if field else [], "msg": message}]}
    return Refusal(body, status_code=status, headers=RETRY if retry else None)


def unauthorized(exc: Unauthorized) -> JSONResponse:
    return Refusal(
        {"detail": [{"loc": ["header", "authorization"], "msg": str(exc)}]},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


def _validation(exc: RequestValidationError) -> JSONResponse:
    return Refusal({"detail": exc.errors()}, status_code=422)


def _forbidden(exc: Forbidden) -> JSONResponse:
    return Refusal({"detail": [{"loc": ["header", "authorization"], "msg": str(exc)}]}, status_code=403)


def _unavailable(exc: Exception) -> JSONResponse:
    return error(503, None, str(exc), retry=True)


# Every refusal memlog makes on purpose, by the exception that carries it.
ANSWERS: dict[type[Exception], Callable[[Any], JSONResponse]] = {
    RequestValidationError: _validation,
    InvalidEvent: lambda exc: error(422, exc.field, exc.problem),
    Unauthorized: unauthorized,
    Forbidden: _forbidden,
    Conflict: lambda exc: error(409, None, str(exc), retry=True),
    KeyReused: lambda exc: error(409, "idempotency_key", str(exc)),
    TargetExists: lambda exc: error(409, "target", str(exc)),
    NothingToDo: lambda exc: error(409, None, str(exc)),
    NotFound: lambda exc: error(404, None, str(exc)),
    LogUnavailable: _unavailable,
    StoreUnavailable: _unavailable,
    SubjectErasing: _unavailable,
    NotCaughtUp: _unavailable,
}


def answer_for(exc: Exception) -> JSONResponse | None:
    """The refusal for `exc`, found as Starlette finds a handler (the nearest class in its MRO); None
    for an exception memlog does not raise on purpose (a bug)."""
    for kind in type(exc).__mro__:
        make = ANSWERS.get(kind)
        if make is not None:
            return make(exc)
    return None


def _handler(make: Callable[[Any], JSONResponse]) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    async def handle(_: Request, exc: Exception) -> JSONResponse:
        return make(exc)

    return handle


def install(app: FastAPI) -> None:
    for kind, make in ANSWERS.items():
        app.add_exception_handler(kind, _handler(make))

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        # everything memlog refuses on purpose is mapped above: what lands here is a bug, logged whole
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return error(500, None, "internal error: the API log has the details")
