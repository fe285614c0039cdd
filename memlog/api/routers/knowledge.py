"""A tenant's own knowledge: facts about no subject (a server's rules, a team's conventions), recalled
for every subject of the tenant, agent-scoped or shared like a subject's facts."""

from __future__ import annotations

import functools
from typing import Any

from fastapi import APIRouter, Query

from memlog.api.auth import TENANT_ONLY
from memlog.api.deps import AFTER, CONFLICT, IDEMPOTENCY_KEY, NOT_FOUND, WAIT, EditReady, ServicesDep
from memlog.api.models import FactAccepted, FactEdit, FactsOut, KnowledgeIn
from memlog.api.routers.facts import CURSOR, LIMIT, SEARCH, facts_out

router = APIRouter()
KNOWLEDGE = "/v1/tenants/{tenant}/facts"


@router.post(KNOWLEDGE, status_code=202, response_model=FactAccepted, dependencies=TENANT_ONLY, responses=CONFLICT)
async def remember(
    tenant: str, body: KnowledgeIn, services: ServicesDep, idempotency_key: str | None = IDEMPOTENCY_KEY
) -> FactAccepted:
    """Save a fact of the tenant: every agent recalls a shared one for every subject; an agent-scoped
    one only that agent. It counts against MEMLOG_TENANT_FACTS_MAX, not against any subject's limit."""

    async def write() -> dict[str, Any]:
        # written by the backend, agent-scoped or not: `backend` (the event's `subject` source, by hand)
        fact_id, position = await services.memory.remember(
            tenant, None, body.text, agent=body.agent, scope=body.scope, source="subject"
        )
        return {"fact_id": fact_id, "position": position.token()}

    names, keys = (("tenant", tenant),), (idempotency_key, body.idempotency_key)
    fields = body.model_dump(exclude={"idempotency_key"})
    return FactAccepted(
        **await services.claims.run(names, (tenant, "knowledge", ""), keys, None, fields, write, "a fact")
    )


@router.get(KNOWLEDGE, response_model=FactsOut, dependencies=TENANT_ONLY)
async def list_knowledge(
    tenant: str,
    services: ServicesDep,
    after: str | None = AFTER,
    wait: float | None = WAIT,
    agent: str | None = Query(default=None, description="Only what this agent recalls; all facts without it."),
    q: str | None = SEARCH,
    limit: int | None = LIMIT,
    cursor: str | None = CURSOR,
) -> FactsOut:
    """The tenant's knowledge: listable, searchable."""
    # `after` and `wait` stay before the filters in the OpenAPI description (a dependency's come last)
    ready = functools.partial(services.positions.wait_all, after, wait)
    return await facts_out(services, tenant, None, agent, q, limit, cursor, ready)


@router.patch(
    KNOWLEDGE + "/{fact_id}",
    status_code=202,
    response_model=FactAccepted,
    dependencies=TENANT_ONLY,
    responses=NOT_FOUND,
)
async def revise(tenant: str, fact_id: str, body: FactEdit, services: ServicesDep, ready: EditReady) -> FactAccepted:
    """Edit a fact of the tenant. `after` makes sure a fact just saved is seen first."""
    position = await services.memory.revise(tenant, None, fact_id, body.text, body.agent, ready=ready)
    return FactAccepted(fact_id=fact_id, position=position.token())


@router.delete(
    KNOWLEDGE + "/{fact_id}",
    status_code=202,
    response_model=FactAccepted,
    dependencies=TENANT_ONLY,
    responses=NOT_FOUND,
)
async def forget(tenant: str, fact_id: str, services: ServicesDep, ready: EditReady) -> FactAccepted:
    """Delete a fact of the tenant; it influences no later read of any subject."""
    position = await services.memory.forget(tenant, None, fact_id, None, ready=ready)
    return FactAccepted(fact_id=fact_id, position=position.token())
