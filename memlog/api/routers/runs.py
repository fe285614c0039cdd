"""Runs (seed 000, "Traces"): traced by backends, seen by operators as shapes only."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from memlog.api.auth import OPERATOR_ONLY, guard_body, requested_by
from memlog.api.deps import AFTER, NOT_FOUND, ServicesDep
from memlog.api.models import ReceiptAccepted, ReceiptIn, RunAccepted, RunIn
from memlog.app.admin import TRACES_PAGE
from schemas.errors import InvalidEvent, NotFound
from schemas.limits import INT64_MAX

router = APIRouter()


@router.post("/v1/runs", status_code=202, response_model=RunAccepted)
async def trace_run(body: RunIn, request: Request, services: ServicesDep) -> RunAccepted:
    """Trace one run (seed 000, "Traces"): redacted before it is produced, sampled by run id."""
    guard_body(request, body.tenant)
    traced = await services.runs.trace(body.to_run())
    position = None if traced.position is None else traced.position.token()
    return RunAccepted(run_id=traced.run_id, sampled=traced.sampled, position=position, bytes=traced.bytes)


@router.post("/v1/receipts", status_code=202, response_model=ReceiptAccepted)
async def record_receipt(body: ReceiptIn, request: Request, services: ServicesDep) -> ReceiptAccepted:
    """Record a receipt (seed 004, evidence you can check): the checked result of one tool call of an
    exchange, or (call_index null) of the action its answer claims. The answer's `answer_state` on context
    reads and archived entries follows from its receipts, whenever they come."""
    guard_body(request, body.tenant)
    receipt_id, position = await services.receipts.record(body.to_receipt())
    return ReceiptAccepted(receipt_id=receipt_id, position=position.token())


@router.get("/v1/tenants/{tenant}/runs", dependencies=OPERATOR_ONLY)
async def runs(
    tenant: str,
    services: ServicesDep,
    agent: str | None = None,
    status: Literal["ok", "error"] | None = None,
    since: int | None = Query(default=None, ge=0, le=INT64_MAX, description="Started at or after (epoch ms)."),
    until: int | None = Query(default=None, ge=0, le=INT64_MAX, description="Started before (epoch ms)."),
    limit: int = Query(default=50, ge=1, le=500),
    after: str | None = AFTER,
    cursor: str | None = Query(default=None, description="`next_cursor` of the previous page."),
) -> dict[str, Any]:
    """Recent runs of a tenant, by shape only, newest first; `next_cursor` pages on (null on the last
    page; a cursor is bound to the filters it was issued with: 422 `cursor` with others)."""
    shapes, following = await services.runs.recent(
        tenant, agent=agent, status=status, since=since, until=until, limit=limit, after=after, cursor=cursor
    )
    return {"tenant": tenant, "runs": shapes, "next_cursor": following}


@router.get("/v1/tenants/{tenant}/runs/{run_id}", dependencies=OPERATOR_ONLY, responses=NOT_FOUND)
async def run_shape(tenant: str, run_id: str, services: ServicesDep, after: str | None = AFTER) -> JSONResponse:
    """One run's shape as a timeline: steps, models, tools, success, tokens, timings; never their text."""
    shape = await services.runs.shape(tenant, run_id, after=after)
    if shape is None:
        raise NotFound(f"no trace of run {run_id} in {tenant} (never traced, sampled out, or expired)")
    return JSONResponse(shape)


@router.get("/v1/tenants/{tenant}/runs/{run_id}/trace", dependencies=OPERATOR_ONLY, responses=NOT_FOUND)
async def run_trace(
    tenant: str, run_id: str, request: Request, services: ServicesDep, after: str | None = AFTER
) -> JSONResponse:
    """One run in full for a developer: steps with prompts and outputs, tool calls with arguments and
    results, all redacted; each read is recorded in the ledger (kind `trace-read`)."""
    whole = await services.runs.whole(tenant, run_id, requested_by=requested_by(request), after=after)
    if whole is None:
        raise NotFound(f"no trace of run {run_id} in {tenant} (never traced, sampled out, or expired)")
    return JSONResponse(whole)


@router.get("/admin/traces", response_class=HTMLResponse, include_in_schema=False)
async def traces_page(request: Request) -> HTMLResponse:
    """The static page (it holds no data); the operator token goes in its form, never in its address."""
    if "token" in request.query_params:
        raise InvalidEvent("token", "never put a credential in an address; type it into the page's form")
    return HTMLResponse(TRACES_PAGE)
