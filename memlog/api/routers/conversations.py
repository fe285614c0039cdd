"""Threads and their conversation archives (seed 004): reads, search, export, operations, retention."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from memlog.api.auth import OPERATOR_ONLY, TENANT_ONLY
from memlog.api.deps import CONFLICT, NOT_FOUND, ArchiveReady, ServicesDep
from memlog.api.gone import unless_gone
from memlog.api.models import Accepted, ArchiveIn, OperationAccepted, PurgeIn, ResetIn, RetentionIn, TargetIn
from memlog.app.conversations import conversation_ref, ready_ref
from projections.archives import ConversationRef
from projections.position import Position
from schemas.errors import NotFound
from schemas.events import now_ms
from schemas.limits import INT64_MAX

router = APIRouter()
THREAD = "/v1/tenants/{tenant}/threads/{thread}"
CONVERSATION = THREAD + "/conversations/{conversation}"
DAY = Query(
    default=None,
    description="YYYY-MM-DD: only entries of that local day in `tz` (23 or 25 hours across a DST change); "
    "with since/until, their intersection.",
)
TZ = Query(default=None, description="An IANA time zone (Area/City, e.g. Europe/Berlin); default UTC.")


def operation(ref: ConversationRef, position: Position) -> OperationAccepted:
    return OperationAccepted(conversation=ref.conversation, position=position.token())


@router.post(
    "/v1/tenants/{tenant}/subjects/{subject}/reset", status_code=202, response_model=Accepted, dependencies=TENANT_ONLY
)
async def reset(tenant: str, subject: str, services: ServicesDep, body: ResetIn | None = None) -> Accepted:
    """A new session (seed 000 "/allay new"): the exchanges leave the active session; memories stay."""
    position = await services.threads().reset_session(tenant, subject, body.reason if body else None)
    return Accepted(exchange_id="", position=position.token())


@router.get(THREAD + "/conversations", dependencies=TENANT_ONLY)
async def list_conversations(tenant: str, thread: str, services: ServicesDep, ready: ArchiveReady) -> dict[str, Any]:
    """The thread's conversations with their archive metadata; `main` is the current one."""
    ref = await ready_ref(tenant, thread, ready=ready)
    metas = await services.conversations.conversations(ref.tenant, ref.thread, ref.owner)
    return {"tenant": tenant, "thread": thread, "conversations": [m.view() for m in metas]}


GROUP = Query(
    default="exchange",
    description="exchange: one result per exchange, its other matching entries under `also`; entry: each entry alone.",
)


@router.get(THREAD + "/search", dependencies=TENANT_ONLY, responses=NOT_FOUND)
async def search(
    request: Request,
    tenant: str,
    thread: str,
    services: ServicesDep,
    ready: ArchiveReady,
    q: str = Query(
        description="Exact phrase first, then Okapi BM25 over whole exchanges (words of every script, "
        "stemmed, stop words out); at most 50 distinct terms."
    ),
    scope: Literal["current", "history"] = Query(
        default="current",
        description="current: active and compacted history since the latest reset; "
        "history: the agent's whole history, reset archives included, labelled by provenance.",
    ),
    conversation: str | None = Query(default=None, description="One conversation; default: all of the thread."),
    since: int | None = Query(default=None, ge=0, le=INT64_MAX, description="Occurred at or after (epoch ms)."),
    until: int | None = Query(default=None, ge=0, le=INT64_MAX, description="Occurred before (epoch ms)."),
    day: str | None = DAY,
    tz: str | None = TZ,
    neighbours: int = Query(default=1, ge=0, le=3, description="Entries either side of each result."),
    limit: int = Query(default=20, ge=1, le=200),
    cursor: str | None = Query(default=None, description="next_cursor of the previous page, same query."),
    group: Literal["exchange", "entry"] = GROUP,
) -> dict[str, Any]:
    """Explicit search over the thread's archived originals (004, "Search and recall")."""
    ref = conversation_ref(tenant, thread)
    return await unless_gone(
        request,
        services.threads().search(
            ref.tenant,
            ref.thread,
            ref.owner,
            q,
            scope=scope,
            conversation=conversation,
            since=since,
            until=until,
            radius=neighbours,
            limit=limit,
            cursor=cursor,
            day=day,
            tz=tz,
            group=group,
            ready=ready,
        ),
    )


SCOPE_ACROSS = Query(
    default="history",
    description="history: every generation, reset archives included, labelled by provenance; "
    "current: active and compacted history since each conversation's latest reset.",
)
SINCE = Query(default=None, ge=0, le=INT64_MAX, description="Occurred at or after (epoch ms).")
UNTIL = Query(default=None, ge=0, le=INT64_MAX, description="Occurred before (epoch ms).")
NEIGHBOURS = Query(default=1, ge=0, le=3, description="Entries either side of each result.")
CURSOR = Query(default=None, description="next_cursor of the previous page, same query.")
Q = Query(
    description="Exact phrase first, then Okapi BM25 over whole exchanges (words of every script, stemmed, "
    "stop words out); at most 50 distinct terms."
)


@router.get("/v1/tenants/{tenant}/agents/{agent}/search", dependencies=TENANT_ONLY)
async def agent_search(
    request: Request,
    tenant: str,
    agent: str,
    services: ServicesDep,
    ready: ArchiveReady,
    q: str = Q,
    scope: Literal["current", "history"] = SCOPE_ACROSS,
    since: int | None = SINCE,
    until: int | None = UNTIL,
    neighbours: int = NEIGHBOURS,
    limit: int = Query(default=20, ge=1, le=200),
    cursor: str | None = CURSOR,
    group: Literal["exchange", "entry"] = GROUP,
) -> dict[str, Any]:
    """The agent's explicit search over the threads it took part in (004, "Search and recall"): the
    entries of its own events in subjects' sessions, its automation thread and the public thread.
    Each result names its thread and conversation and is marked `enters_prompt: false`."""
    return await unless_gone(
        request,
        services.cross_search.agent(
            tenant,
            agent,
            q,
            scope=scope,
            since=since,
            until=until,
            radius=neighbours,
            limit=limit,
            cursor=cursor,
            group=group,
            ready=ready,
        ),
    )


@router.get("/v1/tenants/{tenant}/search", dependencies=OPERATOR_ONLY)
async def tenant_search(
    request: Request,
    tenant: str,
    services: ServicesDep,
    ready: ArchiveReady,
    q: str = Q,
    scope: Literal["current", "history"] = SCOPE_ACROSS,
    since: int | None = SINCE,
    until: int | None = UNTIL,
    neighbours: int = NEIGHBOURS,
    limit: int = Query(default=20, ge=1, le=200),
    cursor: str | None = CURSOR,
    group: Literal["exchange", "entry"] = GROUP,
) -> dict[str, Any]:
    """Operators only: search every thread of the tenant, across agents (004, "Operator cross-agent
    search"); each result names its thread, conversation and agent and is marked `enters_prompt: false`."""
    return await unless_gone(
        request,
        services.cross_search.tenant(
            tenant,
            q,
            scope=scope,
            since=since,
            until=until,
            radius=neighbours,
            limit=limit,
            cursor=cursor,
            group=group,
            ready=ready,
        ),
    )


@router.get(THREAD + "/calendar", dependencies=TENANT_ONLY, responses=NOT_FOUND)
async def calendar(
    tenant: str,
    thread: str,
    services: ServicesDep,
    ready: ArchiveReady,
    tz: str | None = TZ,
    scope: Literal["current", "history"] = Query(
        default="current", description="current: since the latest reset; history: reset archives too."
    ),
    conversation: str | None = Query(default=None, description="One conversation; default: all of the thread."),
    since: int | None = Query(default=None, ge=0, le=INT64_MAX, description="Occurred at or after (epoch ms)."),
    until: int | None = Query(default=None, ge=0, le=INT64_MAX, description="Occurred before (epoch ms)."),
    cursor: str | None = Query(default=None, description="next_cursor of the previous page, same query."),
) -> dict[str, Any]:
    """The local days (in `tz`) with archived entries and how many, newest first: at most 366 days an
    answer, ending with the day of the newest entry in [since, until); `next_cursor` pages to older days."""
    ref = conversation_ref(tenant, thread)
    return await services.threads().calendar(
        ref.tenant,
        ref.thread,
        ref.owner,
        tz=tz,
        scope=scope,
        conversation=conversation,
        since=since,
        until=until,
        cursor=cursor,
        ready=ready,
    )


@router.get(CONVERSATION + "/export", dependencies=TENANT_ONLY, responses=NOT_FOUND)
async def export(
    tenant: str,
    thread: str,
    conversation: str,
    services: ServicesDep,
    ready: ArchiveReady,
    archives: Literal["current", "reset"] = Query(
        default="current",
        description="current: compacted generations since the latest reset plus the active entries; "
        "reset: the reset archives.",
    ),
    limit: int = Query(default=500, ge=1, le=500),
    cursor: str | None = None,
    day: str | None = DAY,
    tz: str | None = TZ,
) -> dict[str, Any]:
    """The transcript from one snapshot: entries appended after the first page are not in it."""
    ref = await ready_ref(tenant, thread, conversation, ready=ready)
    return await services.threads().export(ref, archives=archives, limit=limit, cursor=cursor, day=day, tz=tz)


@router.get(THREAD + "/entries/{entry_id}", dependencies=TENANT_ONLY, responses=NOT_FOUND)
async def entry(
    tenant: str,
    thread: str,
    entry_id: str,
    services: ServicesDep,
    ready: ArchiveReady,
    conversation: str | None = None,
) -> dict[str, Any]:
    """One entry with its original: the live entry first, then its archived occurrence."""
    ref = await ready_ref(tenant, thread, ready=ready)
    found = await services.threads().original(ref.tenant, ref.thread, ref.owner, entry_id, conversation)
    if found is None:
        raise NotFound(f"no entry {entry_id} in {thread}")
    item = {**found.view(), "original": found.original}
    await services.evidence.entries(ref.tenant, [item])  # a tool entry: the run that served its call
    return item


@router.get(THREAD + "/entries/{entry_id}/original", dependencies=TENANT_ONLY, responses=NOT_FOUND)
async def original(
    tenant: str,
    thread: str,
    entry_id: str,
    services: ServicesDep,
    ready: ArchiveReady,
    conversation: str | None = None,
) -> Response:
    """The JSON text exactly as it was received, byte for byte."""
    ref = await ready_ref(tenant, thread, ready=ready)
    found = await services.threads().original(ref.tenant, ref.thread, ref.owner, entry_id, conversation)
    if found is None:
        raise NotFound(f"no entry {entry_id} in {thread}")
    if found.original is None:
        raise NotFound(f"entry {entry_id} came with its exchange; its original is that of {found.exchange_id}.q")
    return Response(found.original.encode("utf-8"), media_type="application/json")


@router.post(
    CONVERSATION + "/compact",
    status_code=202,
    response_model=OperationAccepted,
    dependencies=TENANT_ONLY,
    responses={**NOT_FOUND, **CONFLICT},
)
async def compact(
    tenant: str,
    thread: str,
    conversation: str,
    services: ServicesDep,
    ready: ArchiveReady,
) -> OperationAccepted:
    """Fold the current conversation now (the session fold); the whole previous generation is archived first."""
    ref = await ready_ref(tenant, thread, conversation, ready=ready)
    return operation(ref, await services.threads().compact(ref))


@router.post(
    CONVERSATION + "/reset",
    status_code=202,
    response_model=OperationAccepted,
    dependencies=TENANT_ONLY,
    responses=NOT_FOUND,
)
async def reset_conversation(
    tenant: str,
    thread: str,
    conversation: str,
    services: ServicesDep,
    ready: ArchiveReady,
    body: ResetIn | None = None,
) -> OperationAccepted:
    """Clear the active transcript into a reset archive; reset is not erasure."""
    ref = await ready_ref(tenant, thread, conversation, ready=ready)
    return operation(ref, await services.threads().reset(ref, body.reason if body else None))


@router.post(
    CONVERSATION + "/rename",
    status_code=202,
    response_model=OperationAccepted,
    dependencies=TENANT_ONLY,
    responses={**NOT_FOUND, **CONFLICT},
)
async def rename(
    tenant: str,
    thread: str,
    conversation: str,
    body: TargetIn,
    services: ServicesDep,
    ready: ArchiveReady,
) -> OperationAccepted:
    """Move the conversation's identity to `target`; payloads and archives move with it."""
    ref = await ready_ref(tenant, thread, conversation, ready=ready)
    return operation(ref, await services.threads().rename(ref, body.target))


@router.post(
    CONVERSATION + "/fork",
    status_code=202,
    response_model=OperationAccepted,
    dependencies=TENANT_ONLY,
    responses={**NOT_FOUND, **CONFLICT},
)
async def fork(
    tenant: str,
    thread: str,
    conversation: str,
    body: TargetIn,
    services: ServicesDep,
    ready: ArchiveReady,
) -> OperationAccepted:
    """Copy the newest MEMLOG_FORK_ENTRIES active entries to a new conversation; the source is unchanged."""
    ref = await ready_ref(tenant, thread, conversation, ready=ready)
    return operation(ref, await services.threads().fork(ref, body.target))


@router.post(
    CONVERSATION + "/archive",
    status_code=202,
    response_model=OperationAccepted,
    dependencies=TENANT_ONLY,
    responses=NOT_FOUND,
)
async def archive(
    tenant: str,
    thread: str,
    conversation: str,
    body: ArchiveIn,
    services: ServicesDep,
    ready: ArchiveReady,
) -> OperationAccepted:
    """Change archive metadata only (archived, protected, kind, label)."""
    ref = await ready_ref(tenant, thread, conversation, ready=ready)
    position = await services.threads().archive(
        ref, archived=body.archived, protected=body.protected, kind=body.kind, label=body.label
    )
    return operation(ref, position)


@router.post(CONVERSATION + "/purge", status_code=202, response_model=OperationAccepted, dependencies=OPERATOR_ONLY)
async def purge(
    tenant: str, thread: str, conversation: str, services: ServicesDep, body: PurgeIn | None = None
) -> OperationAccepted:
    """Operators only: delete the conversation's authority and its archives."""
    ref = conversation_ref(tenant, thread, conversation)
    return operation(ref, await services.threads().purge(ref, body.reason if body else None))


@router.post("/v1/tenants/{tenant}/retention", dependencies=OPERATOR_ONLY)
async def retention(tenant: str, services: ServicesDep, body: RetentionIn | None = None) -> dict[str, Any]:
    """Operators only: a dry run by default; with confirm, each target is re-checked, then purged."""
    run = body or RetentionIn()
    now = run.now if run.now is not None else now_ms()
    return await services.threads().retention(tenant, services.settings.retention_policy(), now, confirm=run.confirm)
