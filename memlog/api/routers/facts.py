"""A subject's lasting facts (seeds 000, 003), and the memory tools an agent calls."""

from __future__ import annotations

import functools
from typing import Any, Literal

from fastapi import APIRouter, Query

from memlog.api.auth import TENANT_ONLY
from memlog.api.deps import AFTER, CONFLICT, IDEMPOTENCY_KEY, NOT_FOUND, WAIT, EditReady, ServicesDep
from memlog.api.models import FactAccepted, FactEdit, FactIn, FactOut, FactsOut, ToolRunIn
from memlog.app.memory import TOOL_DEFINITIONS, recalled_view
from memlog.app.positions import Ready
from memlog.services import Services
from projections.facts import shown_source

router = APIRouter()
FACTS = "/v1/tenants/{tenant}/subjects/{subject}/facts"


@router.post(FACTS, status_code=202, response_model=FactAccepted, dependencies=TENANT_ONLY, responses=CONFLICT)
async def remember(
    tenant: str, subject: str, body: FactIn, services: ServicesDep, idempotency_key: str | None = IDEMPOTENCY_KEY
) -> FactAccepted:
    """Save a fact: by the subject by hand (seed 000 "/allay memory <text>"), or by an agent. With an
    idempotency key a retry saves nothing twice."""

    async def write() -> dict[str, Any]:
        fact_id, position = await services.memory.remember(
            tenant, subject, body.text, agent=body.agent, scope=body.scope, source=body.source
        )
        return {"fact_id": fact_id, "position": position.token()}

    names = (("tenant", tenant), ("subject", subject))
    keys = (idempotency_key, body.idempotency_key)
    fields = body.model_dump(exclude={"idempotency_key"})
    return FactAccepted(
        **await services.claims.run(names, (tenant, "facts", subject), keys, subject, fields, write, "a fact")
    )


SEARCH = Query(default=None, description="Search: the facts that bear on it, best first (docs: How recall ranks).")
LIMIT = Query(default=None, ge=1, le=100, description="With q: at most this many (default MEMLOG_RECALL_LIMIT).")
CURSOR = Query(default=None, description="With q: next_cursor of the previous page.")


@router.get(FACTS, response_model=FactsOut, dependencies=TENANT_ONLY)
async def list_facts(
    tenant: str,
    subject: str,
    services: ServicesDep,
    after: str | None = AFTER,
    wait: float | None = WAIT,
    agent: str | None = Query(default=None, description="Only what this agent recalls; all facts without it."),
    q: str | None = SEARCH,
    limit: int | None = LIMIT,
    cursor: str | None = CURSOR,
) -> FactsOut:
    """Every fact memlog keeps about the subject (seed 000 "/allay memory"): listable, searchable.
    A search ranks the tenant's knowledge with them; each result says which it is (`belongs_to`)."""
    # `after` and `wait` stay before the filters in the OpenAPI description (a dependency's come last)
    ready = functools.partial(services.positions.wait_all, after, wait)
    return await facts_out(services, tenant, subject, agent, q, limit, cursor, ready)


async def facts_out(
    services: Services,
    tenant: str,
    subject: str | None,
    agent: str | None,
    q: str | None,
    limit: int | None,
    cursor: str | None,
    ready: Ready,
) -> FactsOut:
    """A subject's facts, or with `subject=None` the tenant's knowledge: all of them the agent may see,
    or with `q` the page of those that bear on it (the tenant's knowledge ranked with a subject's);
    `ready`: the request's wait for `after`, run by the use case once it has checked the names."""
    most = services.settings.facts_max if subject is not None else services.settings.tenant_facts_max
    if q:
        found = await services.memory.search(tenant, subject, q, agent, limit=limit, cursor=cursor, ready=ready)
        facts = [FactOut(**recalled_view(hit)) for hit in found.hits]
        return FactsOut(tenant=tenant, subject=subject, facts=facts, limit=most, next_cursor=found.next_cursor)
    belongs_to: Literal["subject", "tenant"] = "subject" if subject is not None else "tenant"
    listed = [
        FactOut(**{**fact.view(), "source": shown_source(fact.source, belongs_to)}, belongs_to=belongs_to)
        for fact in await services.memory.facts(tenant, subject, agent, ready=ready)
    ]
    return FactsOut(tenant=tenant, subject=subject, facts=listed, limit=most)


@router.patch(
    FACTS + "/{fact_id}", status_code=202, response_model=FactAccepted, dependencies=TENANT_ONLY, responses=NOT_FOUND
)
async def revise(
    tenant: str, subject: str, fact_id: str, body: FactEdit, services: ServicesDep, ready: EditReady
) -> FactAccepted:
    """Edit a fact. `after` makes sure a fact just saved is seen first."""
    position = await services.memory.revise(tenant, subject, fact_id, body.text, body.agent, ready=ready)
    return FactAccepted(fact_id=fact_id, position=position.token())


@router.delete(
    FACTS + "/{fact_id}", status_code=202, response_model=FactAccepted, dependencies=TENANT_ONLY, responses=NOT_FOUND
)
async def forget(tenant: str, subject: str, fact_id: str, services: ServicesDep, ready: EditReady) -> FactAccepted:
    """Delete a fact; it influences no later read."""
    position, transcript = await services.memory.forget_everywhere(tenant, subject, fact_id, None, ready=ready)
    return FactAccepted(
        fact_id=fact_id,
        position=position.token(),
        transcript_position=None if transcript is None else transcript.token(),
    )


@router.delete(FACTS, status_code=202, response_model=FactAccepted, dependencies=TENANT_ONLY)
async def forget_all(tenant: str, subject: str, services: ServicesDep) -> FactAccepted:
    """Delete every fact (seed 000 "/allay forget")."""
    position = await services.memory.clear(tenant, subject)
    return FactAccepted(fact_id="*", position=position.token())


@router.get("/v1/tools")
async def tools() -> list[dict[str, Any]]:
    """The agent's memory tools, as function-calling definitions."""
    return TOOL_DEFINITIONS


@router.post(
    "/v1/tenants/{tenant}/subjects/{subject}/agents/{agent}/tools/{name}",
    dependencies=TENANT_ONLY,
    responses=CONFLICT,
)
async def run_tool(
    tenant: str,
    subject: str,
    agent: str,
    name: str,
    body: ToolRunIn,
    services: ServicesDep,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> dict[str, Any]:
    """Execute remember, recall or forget for an agent; with exchange_id the call joins the transcript.
    With an idempotency key a retry runs nothing twice and is answered with the first run's result."""

    async def write() -> dict[str, Any]:
        return await services.memory.run_tool(
            tenant, subject, agent, name, body.arguments, exchange_id=body.exchange_id, call_index=body.call_index
        )

    names = (("tenant", tenant), ("subject", subject), ("agent", agent))
    keys = (idempotency_key, body.idempotency_key)
    fields = {"agent": agent, "name": name, **body.model_dump(exclude={"idempotency_key"})}
    return await services.claims.run(names, (tenant, "tool-runs", subject), keys, subject, fields, write, "a tool run")
