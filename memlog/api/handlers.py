"""memlog's errors as HTTP answers, all in one place: status, body and headers."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from schemas.errors import (
    Conflict,
    Forbidden,
    InvalidEvent,
    LogUnavailable,
    NotCaughtUp,
    NotFound,
    NothingToDo,
    StoreUnavailable,
    SubjectErasing,
    TargetExists,
    Unauthorized,
)

# Sent with every 503 (the log or a store is away, a read has not caught up, an erasure is running) and
# with the 409 of an idempotency key that another attempt holds (memlog/exchanges.py: how long it can).
RETRY_AFTER_SECONDS = "2"
RETRY = {"Retry-After": RETRY_AFTER_SECONDS}


def error(status: int, field: str | None, message: str, retry: bool = False) -> JSONResponse:
    """The shape of FastAPI's own validation errors, so clients read every refusal one way."""
    body: dict[str, Any] = {"detail": [{"loc": ["body", field] if field else [], "msg": message}]}
    return JSONResponse(body, status_code=status, headers=RETRY if retry else None)


def install(app: FastAPI) -> None:
    @app.exception_handler(InvalidEvent)
    async def invalid(_: Request, exc: InvalidEvent) -> JSONResponse:
        return error(422, exc.field, exc.problem)

    @app.exception_handler(Unauthorized)
    async def unauthorized(_: Request, exc: Unauthorized) -> JSONResponse:
        return JSONResponse(
            {"detail": [{"loc": ["header", "authorization"], "msg": str(exc)}]},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    @app.exception_handler(Forbidden)
    async def forbidden(_: Request, exc: Forbidden) -> JSONResponse:
        return JSONResponse({"detail": [{"loc": ["header", "authorization"], "msg": str(exc)}]}, status_code=403)

    @app.exception_handler(Conflict)
    async def conflict(_: Request, exc: Conflict) -> JSONResponse:
        return error(409, None, str(exc), retry=True)

    @app.exception_handler(TargetExists)
    async def target_exists(_: Request, exc: TargetExists) -> JSONResponse:
        return error(409, "target", str(exc))

    @app.exception_handler(NothingToDo)
    async def nothing_to_do(_: Request, exc: NothingToDo) -> JSONResponse:
        return error(409, None, str(exc))

    @app.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> JSONResponse:
        return error(404, None, str(exc))

    @app.exception_handler(LogUnavailable)
    @app.exception_handler(StoreUnavailable)
    @app.exception_handler(SubjectErasing)
    @app.exception_handler(NotCaughtUp)
    async def unavailable(_: Request, exc: Exception) -> JSONResponse:
        return error(503, None, str(exc), retry=True)
