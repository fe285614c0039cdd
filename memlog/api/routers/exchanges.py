"""Recording exchanges: whole, or streamed part by part as they happen."""

from __future__ import annotations

from fastapi import APIRouter, Request

from memlog.api.auth import guard_body
from memlog.api.deps import CONFLICT, IDEMPOTENCY_KEY, ServicesDep, original
from memlog.api.models import Accepted, AnswerIn, ExchangeIn, QuestionIn, ToolCallEventIn
from memlog.app.claims import one_key
from memlog.app.exchanges import Receipt

router = APIRouter()


def _accepted(receipt: Receipt) -> Accepted:
    return Accepted(exchange_id=receipt.exchange_id, position=receipt.position, idempotent=receipt.idempotent)


@router.post("/v1/exchanges", status_code=202, response_model=Accepted, responses=CONFLICT)
async def record_exchange(
    body: ExchangeIn, request: Request, services: ServicesDep, idempotency_key: str | None = IDEMPOTENCY_KEY
) -> Accepted:
    guard_body(request, body.tenant)
    if idempotency_key is not None:
        body = body.model_copy(update={"idempotency_key": one_key(idempotency_key, body.idempotency_key)})
    exchange = body.to_exchange(await original(request))
    return _accepted(await services.exchanges.record(exchange))


@router.post("/v1/exchanges/{exchange_id}/question", status_code=202, response_model=Accepted, responses=CONFLICT)
async def ask(exchange_id: str, body: QuestionIn, request: Request, services: ServicesDep) -> Accepted:
    guard_body(request, body.tenant)
    part = body.to_part(await original(request))
    return _accepted(await services.exchanges.record_part(exchange_id, part))


@router.post("/v1/exchanges/{exchange_id}/tool-calls", status_code=202, response_model=Accepted, responses=CONFLICT)
async def tool_call(exchange_id: str, body: ToolCallEventIn, request: Request, services: ServicesDep) -> Accepted:
    guard_body(request, body.tenant)
    part = body.to_part(await original(request))
    return _accepted(await services.exchanges.record_part(exchange_id, part))


@router.post("/v1/exchanges/{exchange_id}/answer", status_code=202, response_model=Accepted, responses=CONFLICT)
async def answer(exchange_id: str, body: AnswerIn, request: Request, services: ServicesDep) -> Accepted:
    guard_body(request, body.tenant)
    part = body.to_part(await original(request))
    return _accepted(await services.exchanges.record_part(exchange_id, part))
