"""POST /v1/exchanges the short way through the API (issue 38).

Every exchange a backend records is one POST, so after the context read it is the API's busiest route;
FastAPI's routing, dependency solving and exception layers cost about a fifth of the API's CPU for it.
This ASGI middleware serves a plain POST of a whole exchange directly: the body validated by the route's
own model as the route validates it, the same credential check, the same service call, the same answer
and the same refusals (memlog/api/handlers.py). Whatever it is not sure to answer exactly as the route
would goes on to FastAPI with the body it read: a body the model refuses (FastAPI words that 422), an
`Idempotency-Key` header, a query string, a content type other than JSON, a root path, and any request
while FastAPI's own telemetry is on (its server span is named by the route FastAPI selects).
"""

from __future__ import annotations

import json

from pydantic import TypeAdapter, ValidationError
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memlog.api.guard import replay_body
from memlog.api.handlers import answer_for
from memlog.api.models import Accepted, ExchangeIn
from memlog.api.shortcut import ROUTE_TEMPLATE, header
from memlog.app.credentials import Credentials
from memlog.services import Services

ROUTE = "/v1/exchanges"
# FastAPI validates a body parameter that is a model with this adapter's call (from_attributes=True)
BODY: TypeAdapter[ExchangeIn] = TypeAdapter(ExchangeIn)


def plain(scope: Scope) -> bool:
    """A POST of a whole exchange that the route would take as this shortcut does."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != ROUTE:
        return False
    if scope.get("root_path") or scope["query_string"] or scope.get("fastapi.telemetry") is not None:
        return False
    kind = (header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" and header(scope, b"idempotency-key") is None


def parsed(body: bytes) -> ExchangeIn | None:
    """The body as the route's model, or None when FastAPI should say what is wrong with it."""
    try:
        return BODY.validate_python(json.loads(body), from_attributes=True)
    except (ValueError, ValidationError):  # not JSON, not UTF-8, or refused by the model
        return None


class ExchangeShortcut:
    """Serves plain POSTs of whole exchanges; every other request goes on to `app` unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not plain(scope):
            await self.app(scope, receive, send)
            return
        body = await whole_body(receive)
        if body is None:
            return  # the client went away
        exchange = parsed(body)
        if exchange is None:
            await self.app(scope, replay_body(body, receive), send)
            return
        scope[ROUTE_TEMPLATE] = ROUTE  # for the HTTP metrics: this request never reaches a route
        state = scope["app"].state
        try:
            credentials: Credentials = state.credentials
            credentials.check(header(scope, b"authorization"), exchange.tenant)
            services: Services = state.services
            receipt = await services.exchanges.record(exchange.to_exchange(body.decode("utf-8")))
        except Exception as exc:
            refusal = answer_for(exc)
            if refusal is None:
                raise  # a bug: the app's error middleware logs it and answers 500, as for any route
            await refusal(scope, receive, send)
            return
        accepted = Accepted(exchange_id=receipt.exchange_id, position=receipt.position, idempotent=receipt.idempotent)
        answer = Response(accepted.model_dump_json(), status_code=202, media_type="application/json")
        await answer(scope, receive, send)


async def whole_body(receive: Receive) -> bytes | None:
    """The request's body; None when the client went away before it was all there."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
