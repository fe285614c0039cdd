"""What an agent reads before it answers: a session with its facts, the public thread, an automation thread."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query

from memlog.api.auth import TENANT_ONLY
from memlog.api.deps import AFTER, WAIT, ServicesDep
from memlog.api.models import Context

router = APIRouter()


@router.get("/v1/tenants/{tenant}/subjects/{subject}/context", response_model=Context, dependencies=TENANT_ONLY)
async def context(
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
        description="recent: when fewer facts than the limit bear on the question, the newest others after "
        "them, marked how=recent. Without it, only facts that bear on the question (none when nothing does).",
    ),
) -> Context:
    """The subject's session and the facts that bear on the question (the subject's and the tenant's
    knowledge), ready to put before the model."""
    read = await services.contexts.session(
        tenant, subject, question=question, agent=agent, after=after, wait=wait, fill=fill == "recent"
    )
    return Context.of(read)


@router.get("/v1/tenants/{tenant}/public/context", response_model=Context, dependencies=TENANT_ONLY)
async def public_context(
    tenant: str, services: ServicesDep, after: str | None = AFTER, wait: float | None = WAIT
) -> Context:
    """The tenant's public thread: every question prefixed with its asker's name, no tool results."""
    return Context.of(await services.contexts.public(tenant, after=after, wait=wait))


@router.get("/v1/tenants/{tenant}/agents/{agent}/context", response_model=Context, dependencies=TENANT_ONLY)
async def automation_context(
    tenant: str, agent: str, services: ServicesDep, after: str | None = AFTER, wait: float | None = WAIT
) -> Context:
    """An automation agent's own thread, apart from the subjects' sessions."""
    return Context.of(await services.contexts.automation(tenant, agent, after=after, wait=wait))
