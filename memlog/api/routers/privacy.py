"""An operator's requests about a subject: erase, export, and the ledger of what they did."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from memlog.api.auth import OPERATOR_ONLY, requested_by
from memlog.api.deps import NOT_FOUND, ServicesDep
from memlog.api.models import EraseIn, PrivacyOut
from schemas.errors import NotFound

router = APIRouter()
SUBJECT = "/v1/tenants/{tenant}/subjects/{subject}"
NEXT_CURSOR = "Next-Cursor"


@router.post(SUBJECT + "/erase", response_model=PrivacyOut, dependencies=OPERATOR_ONLY)
async def erase_subject(
    tenant: str, subject: str, request: Request, services: ServicesDep, body: EraseIn | None = None
) -> PrivacyOut:
    """Erase everything memlog holds about a subject, then their data key (operators only)."""
    erased = await services.subject_requests.erase(
        tenant, subject, requested_by=requested_by(request), reason=body.reason if body else None
    )
    return PrivacyOut(
        request_id=erased.request_id, position=erased.position.token(), done=erased.done, ledger=erased.ledger
    )


@router.post(SUBJECT + "/export", dependencies=OPERATOR_ONLY)
async def export_subject(tenant: str, subject: str, request: Request, services: ServicesDep) -> Response:
    """One JSON bundle of everything memlog holds about a subject (operators only)."""
    export = await services.subject_requests.export(tenant, subject, requested_by=requested_by(request))
    if not export.done or export.bundle is None:
        out = PrivacyOut(request_id=export.request_id, position=export.position.token(), done=False)
        return JSONResponse(out.model_dump(), status_code=202)
    return StreamingResponse(export.bundle, media_type="application/json")  # in parts: a bundle has no size limit


@router.get("/v1/tenants/{tenant}/exports/{request_id}", dependencies=OPERATOR_ONLY, responses=NOT_FOUND)
async def export_bundle(tenant: str, request_id: str, services: ServicesDep) -> Response:
    bundle = await services.subject_requests.bundle(tenant, request_id)
    if bundle is None:
        raise NotFound(f"no export {request_id} (a bundle is kept MEMLOG_EXPORT_KEEP_SECONDS, a day by default)")
    return StreamingResponse(bundle, media_type="application/json")


LEDGER_PAGE: dict[int | str, dict[str, Any]] = {
    200: {
        "headers": {
            NEXT_CURSOR: {
                "description": "Pass it as `cursor` for the next page; absent on the last page.",
                "schema": {"type": "string"},
            }
        }
    }
}


@router.get("/v1/tenants/{tenant}/ledger", dependencies=OPERATOR_ONLY, responses=LEDGER_PAGE)
async def ledger(
    tenant: str,
    services: ServicesDep,
    response: Response,
    subject: str | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
    cursor: str | None = Query(default=None, description=f"The `{NEXT_CURSOR}` header of the previous page."),
) -> list[dict[str, Any]]:
    """Operator requests and what they did (erasure counts, never content), newest first; the body stays
    a list, and the `Next-Cursor` header pages on (a cursor is bound to `subject`: 422 `cursor` otherwise)."""
    entries, following = await services.subject_requests.ledger(
        tenant=tenant, subject=subject, limit=limit, cursor=cursor
    )
    if following is not None:
        response.headers[NEXT_CURSOR] = following
    return entries
