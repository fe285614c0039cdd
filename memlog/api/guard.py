"""What the API checks before a route sees a request: how large it is, who sends it, and whether the
stores can keep its JSON. The declared size and the credential before the body is read, the rest
before it is parsed.

FastAPI reads and parses a body before it runs a route's dependencies, so these checks cannot be
dependencies: this ASGI middleware runs them first, then hands the route the body it read.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlog.api.handlers import Refusal, problem, unauthorized
from memlog.app.credentials import Credentials
from schemas.errors import Unauthorized
from schemas.limits import MAX_JSON_DEPTH, JsonProblem, json_problem

# Routes anyone may call: liveness, readiness, the OpenAPI description and its pages, the tool
# definitions, and the trace page, which is static: it asks for the operator token in a form and
# sends it as a header to the routes it reads, which need it.
PUBLIC_PATHS = frozenset(
    {"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/v1/tools", "/admin/traces"}
)
# Routes that keep the JSON text as received (an exchange's `original`): a lone surrogate there is kept
# in it and stored as U+FFFD in the structured copy (schemas.exchanges.encodable); elsewhere refused.
ORIGINAL_KEPT = "/v1/exchanges"
THREAD_BODY_BYTES = 65_536  # a body larger than this is checked off the event loop


class BodyTooLarge(Exception):
    """The body went past MEMLOG_MAX_BODY_BYTES while it was read."""


class RequestGuard:
    """Args:
    app: the application it guards.
    credentials: with none configured, every caller passes (the API then listens on loopback only).
    max_body_bytes: MEMLOG_MAX_BODY_BYTES; a larger body is refused with 413, unread past the limit.
    """

    def __init__(self, app: ASGIApp, credentials: Credentials, max_body_bytes: int) -> None:
        self.app = app
        self.credentials = credentials
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path: str = scope["path"]
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(scope, receive, send, int(declared))
            return
        if self.credentials.enabled and path not in PUBLIC_PATHS:
            try:
                self.credentials.holder(headers.get("authorization"))
            except Unauthorized as exc:
                await unauthorized(exc)(scope, receive, send)
                return
        try:
            body = await self._read(receive)
        except BodyTooLarge:
            await self._too_large(scope, receive, send, None)
            return
        if body is None:
            return  # the client went away
        if body and _is_json(headers.get("content-type")):
            refusal = await self._check(body, lone_surrogates=path.startswith(ORIGINAL_KEPT))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, replay_body(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, refused as soon as it passes the limit (chunked bodies declare no length)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, declared: int | None) -> None:
        size = "" if declared is None else f"{declared} bytes; "
        message = f"the body is {size}larger than MEMLOG_MAX_BODY_BYTES ({self.max_body_bytes} bytes)"
        await Refusal({"detail": [problem(413, ["body"], message)]}, status_code=413)(scope, receive, send)

    async def _check(self, body: bytes, *, lone_surrogates: bool) -> Refusal | None:
        if len(body) > THREAD_BODY_BYTES:
            return await run_in_threadpool(_refusal, body, lone_surrogates)
        return _refusal(body, lone_surrogates)


def _refusal(body: bytes, lone_surrogates: bool) -> Refusal | None:
    """A 422 naming what the stores could not keep; None when the body can go on to its route (a body
    that is not JSON at all is left to FastAPI, which says where it breaks)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _unprocessable(JsonProblem((), f"is not UTF-8: {exc}"))
    try:
        value = json.loads(text, parse_constant=_constant)
    except _NotJson as exc:
        return _unprocessable(JsonProblem((), str(exc)))
    except RecursionError:
        return _unprocessable(JsonProblem((), f"is nested deeper than {MAX_JSON_DEPTH} levels"))
    except ValueError:
        return None
    found = json_problem(value, lone_surrogates=lone_surrogates)
    return None if found is None else _unprocessable(found)


class _NotJson(ValueError):
    pass


def _constant(name: str) -> Any:
    raise _NotJson(f"holds {name}, which is not JSON (JSON has no NaN or Infinity)")


def _unprocessable(found: JsonProblem) -> Refusal:
    return Refusal({"detail": [problem(422, ["body", *found.path], found.problem)]}, status_code=422)


def _is_json(content_type: str | None) -> bool:
    """What FastAPI parses as JSON (it leaves any other body unparsed)."""
    if content_type is None:
        return False
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def replay_body(body: bytes, receive: Receive) -> Receive:
    """The body once, as one message; after it, the client's own messages (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
