"""What an agent reads before it answers: a session with its facts, the public thread, an automation thread."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Request, Response

from memlog.api.auth import TENANT_ONLY
from memlog.api.context_json import NOT_MODIFIED, context_response
from memlog.api.deps import AFTER, WAIT, ServicesDep
from memlog.api.models import Context

router = APIRouter()


@router.get(
    "/v1/tenants/{tenant}/subjects/{subject}/context",
    response_model=Context,
    responses=NOT_MODIFIED,
    dependencies=TENANT_ONLY,
)
async def context(
    request: Request,
    tenant: str,
    subject: str,
    services: ServicesDep,
    after: str | None = AFTER,
    wait: float | None = WAIT,
    question: str | None = Query(default=None, description="The question about to be answered: facts bear on it."),
    agent: str | None = Query(
        default=None, description="The agent answering: its own facts and the shared ones; without it, shared only."
    ),
    fill: Literal["recent"] | None = Query(
        default=None,
        description="With MEMLOG_RECALL_STRICT only (otherwise the others are always given): recent: when fewer "
        "facts than the limit bear on the question, the newest others after them, marked how=recent.",
    ),
) -> Response:
    """The subject's session and the best facts for the question (the subject's and the tenant's
    knowledge, those that bear on it first), ready to put before the model. With an `ETag`:
    `If-None-Match` naming it answers 304."""
    read = await services.contexts.ready_session(
        tenant, subject, question=question, agent=agent, after=after, wait=wait, fill=fill == "recent"
    )
    return context_response(request, read)


@router.get(
    "/v1/tenants/{tenant}/public/context", response_model=Context, responses=NOT_MODIFIED, dependencies=TENANT_ONLY
)
async def public_context(
    request: Request, tenant: str, services: ServicesDep, after: str | None = AFTER, wait: float | None = WAIT
) -> Response:
    """The tenant's public thread: every question prefixed with its asker's name, no tool results."""
    return context_response(request, await services.contexts.ready_public(tenant, after=after, wait=wait))


@router.get(
    "/v1/tenants/{tenant}/agents/{agent}/context",
    response_model=Context,
    responses=NOT_MODIFIED,
    dependencies=TENANT_ONLY,
)
async def automation_context(
    request: Request,
    tenant: str,
    agent: str,
    services: ServicesDep,
    after: str | None = AFTER,
    wait: float | None = WAIT,
) -> Response:
    """An automation agent's own thread, apart from the subjects' sessions."""
    return context_response(request, await services.contexts.ready_automation(tenant, agent, after=after, wait=wait))
