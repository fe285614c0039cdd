"""The HTTP API: record exchanges, read context. OpenAPI at /openapi.json."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from adapters.connections import kafka_options
from adapters.summarizers import SummarizerFailed
from config.settings import MAX_REPLAY_WORKERS, Settings
from memlog import privacy
from memlog.admin import TRACES_PAGE
from memlog.credentials import Credentials
from memlog.memory import TOOL_DEFINITIONS, recalled_view
from memlog.services import Services, open_services
from projections.archives import ConversationRef, parse_thread
from projections.ports import Checkpoints
from projections.position import Position
from projections.redaction import Redactor
from projections.session import Session, ThreadKey
from projections.traces import shape
from schemas.errors import (
    Conflict,
    Forbidden,
    InvalidEvent,
    LogUnavailable,
    NotCaughtUp,
    NotFound,
    NothingToDo,
    StoreUnavailable,
    SubjectErasing,
    TargetExists,
    Unauthorized,
)
from schemas.events import (
    AUTOMATION_THREAD,
    MAIN_CONVERSATION,
    SESSION_THREAD,
    AnswerGiven,
    Envelope,
    ModelStep,
    QuestionAsked,
    RunTraced,
    ThreadReset,
    ToolCalled,
    TraceToolCall,
    check_name,
    json_text,
    now_ms,
)
from schemas.exchanges import encodable
from streams.metrics import Metrics

log = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = "2"
# A claim outlives the producer's own deadline; if the API cannot store the outcome (Redis went away
# after Kafka took the exchange), the claim lapses and a retry produces again. The exchange id comes
# from the idempotency key, so the projections hold that exchange once.


class ToolCallIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: Any = Field(default_factory=dict, description="Any JSON value.")
    result: Any = Field(default=None, description="Any JSON value; kept whole so follow-ups need no second call.")
    ok: bool = True
    duration_ms: int | None = Field(default=None, ge=0)


class ExchangeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tenant: str
    subject: str
    thread: Literal["session", "public", "automation"] = Field(
        default="session",
        description="session: the subject's own; public: the tenant's public thread; automation: the agent's.",
    )
    asker: str | None = Field(default=None, description="Display name; public questions start with it.")
    question: str
    tool_calls: list[ToolCallIn] = Field(default_factory=list)
    answer: str | None = None
    channel: Literal["v1", "v2", "askx"] = "v2"
    idempotency_key: str | None = None
    occurred_at: int | None = Field(default=None, ge=0, description="Epoch milliseconds; defaults to now.")
    agent: str | None = None
    model: str | None = None
    exchange_id: str | None = Field(default=None, description="Your own id for it; default: a new one.")
    conversation: str | None = Field(
        default=None, description="The conversation of the thread; default: its current one (main)."
    )


class Routed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tenant: str
    subject: str
    occurred_at: int | None = Field(default=None, ge=0)
    agent: str | None = None
    conversation: str | None = None


class QuestionIn(Routed):
    thread: Literal["session", "public", "automation"] = "session"
    asker: str | None = None
    question: str
    channel: Literal["v1", "v2", "askx"] = "v2"
    idempotency_key: str | None = None


class ToolCallEventIn(Routed):
    thread: Literal["session", "public", "automation"] = "session"
    call_index: int = Field(ge=0, description="Order of the call within the exchange, from 0.")
    name: str
    arguments: Any = Field(default_factory=dict)
    result: Any = None
    ok: bool = True
    duration_ms: int | None = Field(default=None, ge=0)


class AnswerIn(Routed):
    thread: Literal["session", "public", "automation"] = "session"
    answer: str
    model: str | None = None


class Accepted(BaseModel):
    exchange_id: str
    position: str
    idempotent: bool = False


class ToolCallOut(BaseModel):
    name: str
    arguments: Any
    result: Any
    ok: bool
    duration_ms: int | None


class ExchangeOut(BaseModel):
    exchange_id: str
    question: str
    tool_calls: list[ToolCallOut]
    answer: str | None
    channel: str
    occurred_at: int
    complete: bool
    line: str | None = Field(description="askx exchanges: the one line they land as (seed 000).")


class Context(BaseModel):
    tenant: str
    subject: str | None
    thread: str
    owner: str
    summary: str
    exchanges: list[ExchangeOut]
    facts: list[FactOut] = Field(description="The lasting facts that bear on the question (seed 003).")
    tokens: int = Field(description="Tokens the thread holds (exchanges and summary), counted with tiktoken.")
    fold_at_tokens: int
    tokens_to_fold: int = Field(description="How far the thread is from the next fold, in tokens.")
    exchanges_to_fold: int = Field(description="How far the thread is from the next fold, in exchanges.")
    rendered: str = Field(description="The context as one text; between folds it only grows at the end.")
    rendered_facts: str = Field(default="", description="The facts as lines, to put under a heading of their own.")


class FactIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    scope: Literal["agent", "shared"] | None = Field(
        default=None,
        description="agent: only that agent recalls it; shared: every agent of the tenant. "
        "Default: agent when an agent is given, else shared.",
    )
    agent: str | None = Field(default=None, description="The agent that saves it (needed for scope agent).")
    source: Literal["agent", "subject"] = Field(default="subject", description="Saved by the agent or by hand.")


class FactEdit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    agent: str | None = None


class FactOut(BaseModel):
    fact_id: str
    scope: str
    agent: str | None
    text: str
    source: str
    created_at: int
    updated_at: int
    score: float | None = None
    how: str | None = Field(default=None, description="keyword, similarity, or recent (nothing matched).")


class FactAccepted(BaseModel):
    fact_id: str
    position: str


class FactsOut(BaseModel):
    tenant: str
    subject: str
    facts: list[FactOut]
    limit: int


class ToolRunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arguments: dict[str, Any] = Field(default_factory=dict)
    exchange_id: str | None = Field(default=None, description="Record the call in this exchange's transcript.")
    call_index: int | None = Field(default=None, ge=0, description="Its place among the exchange's tool calls.")


class ModelStepIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seq: int | None = Field(default=None, ge=0, description="Place in the timeline; default: by start time.")
    model: str
    prompt: str
    output: str
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    started_at: int = Field(ge=0)
    duration_ms: int = Field(ge=0)


class TraceToolCallIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seq: int | None = Field(default=None, ge=0)
    name: str
    arguments: Any = Field(default_factory=dict)
    result: Any = None
    ok: bool = True
    started_at: int = Field(ge=0)
    duration_ms: int = Field(ge=0)


class RunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tenant: str
    subject: str | None = None
    agent: str
    run_id: str | None = None
    status: Literal["ok", "error"]
    started_at: int = Field(ge=0)
    ended_at: int = Field(ge=0)
    steps: list[ModelStepIn] = Field(default_factory=list)
    tool_calls: list[TraceToolCallIn] = Field(default_factory=list)


class RunAccepted(BaseModel):
    run_id: str
    sampled: bool = Field(description="False: TRACE_SAMPLE left this run out; nothing was produced.")
    position: str | None
    bytes: int


class ResetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str | None = None


class EraseIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str | None = Field(default=None, description="Recorded in the log; do not put personal data here.")


class ReplayIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    projection: Literal["sessions", "facts", "traces", "archives", "all"] = "all"
    since: int | None = Field(default=None, ge=0, description="Epoch ms to start from; default: the beginning.")
    switch: bool = Field(default=True, description="Move reads to the rebuilt namespace when it has caught up.")
    workers: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REPLAY_WORKERS,
        description="Processes sharing the partitions; default MEMLOG_REPLAY_WORKERS.",
    )


class PrivacyOut(BaseModel):
    request_id: str
    position: str
    done: bool = Field(description="False: the worker has not applied it within the wait; ask the ledger later.")
    ledger: dict[str, Any] | None = None


class TargetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target: str = Field(description="The new conversation's name; it must not exist, nor be the source.")


class ArchiveIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    archived: bool | None = None
    protected: bool | None = Field(default=None, description="Protected conversations are never deleted by retention.")
    kind: Literal["main", "task", "subagent"] | None = Field(default=None, description="The retention policy.")
    label: str | None = None


class PurgeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str | None = None


class RetentionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    confirm: bool = Field(default=False, description="Without it, a dry run: the targets only.")
    now: int | None = Field(default=None, ge=0, description="Epoch ms to plan against; default: now.")


class OperationAccepted(BaseModel):
    conversation: str
    position: str


def _error(status: int, field: str | None, message: str, retry: bool = False) -> JSONResponse:
    body: dict[str, Any] = {"detail": [{"loc": ["body", field] if field else [], "msg": message}]}
    headers = {"Retry-After": RETRY_AFTER_SECONDS} if retry else None
    return JSONResponse(body, status_code=status, headers=headers)


@dataclass
class ApiState:
    settings: Settings
    services: Services
    offsets: AIOKafkaConsumer
    redactor: Redactor
    metrics: Metrics


def create_api(settings: Settings) -> FastAPI:
    """The ASGI app. Clients are opened in its lifespan, never at import."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        metrics = Metrics()
        async with open_services(settings, producer=True, metrics=metrics) as services:
            # a summarizer or embedder set up wrongly stops the API at start, not at the first fold or recall
            services.summarizer  # noqa: B018
            services.embedder  # noqa: B018
            offsets = AIOKafkaConsumer(**kafka_options(settings), enable_auto_commit=False, request_timeout_ms=10_000)
            await offsets.start()
            api = ApiState(settings, services, offsets, settings.redactor(), metrics)
            app.state.api = api
            for prepare in (
                services.vault.prepare,
                services.ledger.prepare,
                services.exports.prepare,
                services.idempotency.prepare,
            ):
                try:
                    await prepare()
                except StoreUnavailable as exc:
                    log.warning("stores not prepared yet: %s", exc)
            follower = asyncio.create_task(_follow_namespace(api))
            log.info("memlog API listening on http://%s:%d", settings.api_host, settings.api_port)
            try:
                yield
            finally:
                follower.cancel()
                await offsets.stop()

    app = FastAPI(
        title="memlog", version="0.1.0", lifespan=lifespan, description="Event-sourced memory for AI agent backends."
    )

    @app.exception_handler(InvalidEvent)
    async def invalid(_: Request, exc: InvalidEvent) -> JSONResponse:
        return _error(422, exc.field, exc.problem)

    @app.exception_handler(Unauthorized)
    async def unauthorized(_: Request, exc: Unauthorized) -> JSONResponse:
        return JSONResponse(
            {"detail": [{"loc": ["header", "authorization"], "msg": str(exc)}]},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    @app.exception_handler(Forbidden)
    async def forbidden(_: Request, exc: Forbidden) -> JSONResponse:
        return JSONResponse({"detail": [{"loc": ["header", "authorization"], "msg": str(exc)}]}, status_code=403)

    @app.exception_handler(Conflict)
    async def conflict(_: Request, exc: Conflict) -> JSONResponse:
        return _error(409, None, str(exc), retry=True)

    @app.exception_handler(TargetExists)
    async def target_exists(_: Request, exc: TargetExists) -> JSONResponse:
        return _error(409, "target", str(exc))

    @app.exception_handler(NothingToDo)
    async def nothing_to_do(_: Request, exc: NothingToDo) -> JSONResponse:
        return _error(409, None, str(exc))

    @app.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> JSONResponse:
        return _error(404, None, str(exc))

    @app.exception_handler(LogUnavailable)
    @app.exception_handler(StoreUnavailable)
    @app.exception_handler(SubjectErasing)
    @app.exception_handler(NotCaughtUp)
    async def unavailable(_: Request, exc: Exception) -> JSONResponse:
        return _error(503, None, str(exc), retry=True)

    def state(request: Request) -> ApiState:
        api: ApiState = request.app.state.api
        return api

    credentials = Credentials.from_settings(settings)

    async def tenant_guard(request: Request) -> None:
        """Routes with the tenant in their path: a backend credential must be bound to it."""
        credentials.check(request.headers.get("authorization"), request.path_params.get("tenant"))

    async def operator_guard(request: Request) -> None:
        credentials.check(request.headers.get("authorization"), None, operator=True)

    def guard_body(request: Request, tenant: str) -> None:
        """Routes with the tenant in their body."""
        credentials.check(request.headers.get("authorization"), tenant)

    tenant_only = [Depends(tenant_guard)]
    operator_only = [Depends(operator_guard)]

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/metrics", include_in_schema=False)
    async def metrics_page(request: Request) -> Response:
        """Prometheus metrics; consumer lag is measured at each scrape."""
        api = state(request)
        report = await _lag_report(api)
        for name, lag in report["lag"].items():
            projection, position = name.split("/")
            topic, partition = position.rsplit(".", 1)
            api.metrics.lag.labels(projection, topic, partition).set(lag)
        return Response(api.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        """Ready when Kafka, Redis and MongoDB answer and every projection has applied the log.

        Not ready (503 with Retry-After) while a service is down: the report names it.
        """
        api = state(request)
        try:
            report = await _lag_report(api)
        except (LogUnavailable, StoreUnavailable) as exc:
            return JSONResponse(
                {"ready": False, "unavailable": str(exc)},
                status_code=503,
                headers={"Retry-After": RETRY_AFTER_SECONDS},
            )
        ready = all(lag <= api.settings.ready_max_lag for lag in report["lag"].values())
        headers = None if ready else {"Retry-After": RETRY_AFTER_SECONDS}
        return JSONResponse({"ready": ready, **report}, status_code=200 if ready else 503, headers=headers)

    @app.post("/v1/exchanges", status_code=202, response_model=Accepted)
    async def record_exchange(body: ExchangeIn, request: Request) -> Accepted:
        guard_body(request, body.tenant)
        api = state(request)
        payload = body.model_dump(exclude_none=True)
        payload["tool_calls"] = [call.model_dump() for call in body.tool_calls]
        payload["original"] = await _original(request)
        key = body.idempotency_key
        if key is None:
            recorded = await api.services.producer.record_exchange(payload)
            return Accepted(exchange_id=recorded.exchange_id, position=recorded.position.token())
        check_name("tenant", body.tenant)
        check_name("subject", body.subject)
        check_name("idempotency_key", key)
        owner = {"session": body.subject, "automation": body.agent or "", "public": ""}[body.thread]
        claim = (body.tenant, body.thread, owner, key)
        held = await api.services.idempotency.reserve(*claim, body.subject)
        if held is not None:
            return await _replayed(api, claim, held)
        try:
            recorded = await api.services.producer.record_exchange(payload)
        except BaseException:
            await api.services.idempotency.release(*claim)
            raise
        accepted = Accepted(exchange_id=recorded.exchange_id, position=recorded.position.token())
        await api.services.idempotency.complete(*claim, accepted.model_dump())
        return accepted

    @app.post("/v1/exchanges/{exchange_id}/question", status_code=202, response_model=Accepted)
    async def ask(exchange_id: str, body: QuestionIn, request: Request) -> Accepted:
        guard_body(request, body.tenant)
        env = _envelope(state(request), body, body.idempotency_key, body.thread)
        event = QuestionAsked(
            env,
            exchange_id,
            encodable(body.question),
            body.channel,
            body.asker,
            conversation=body.conversation,
            original=await _original(request),
        )
        return await _produce(state(request), event)

    @app.post("/v1/exchanges/{exchange_id}/tool-calls", status_code=202, response_model=Accepted)
    async def tool_call(exchange_id: str, body: ToolCallEventIn, request: Request) -> Accepted:
        guard_body(request, body.tenant)
        env = _envelope(state(request), body, None, body.thread)
        event = ToolCalled(
            env,
            exchange_id,
            body.call_index,
            body.name,
            encodable(json_text("arguments", body.arguments)),
            encodable(json_text("result", body.result)),
            body.ok,
            body.duration_ms,
            conversation=body.conversation,
            original=await _original(request),
        )
        return await _produce(state(request), event)

    @app.post("/v1/exchanges/{exchange_id}/answer", status_code=202, response_model=Accepted)
    async def answer(exchange_id: str, body: AnswerIn, request: Request) -> Accepted:
        guard_body(request, body.tenant)
        env = _envelope(state(request), body, None, body.thread)
        event = AnswerGiven(
            env,
            exchange_id,
            encodable(body.answer),
            model=body.model,
            conversation=body.conversation,
            original=await _original(request),
        )
        return await _produce(state(request), event)

    after_query = Query(default=None, description="A position token; wait until it is applied.")
    wait_query = Query(default=None, ge=0, description="Seconds to wait for `after`; at most MEMLOG_READ_WAIT_SECONDS.")

    @app.get("/v1/tenants/{tenant}/subjects/{subject}/context", response_model=Context, dependencies=tenant_only)
    async def context(
        tenant: str,
        subject: str,
        request: Request,
        after: str | None = after_query,
        wait: float | None = wait_query,
        question: str | None = Query(default=None, description="The question about to be answered: facts bear on it."),
        agent: str | None = Query(default=None, description="The agent answering: its own facts and the shared ones."),
    ) -> Context:
        """The subject's session and the facts that bear on the question, ready to put before the model."""
        key = ThreadKey.session(check_name("tenant", tenant), check_name("subject", subject))
        if agent is not None:
            check_name("agent", agent)
        api = state(request)
        started = time.perf_counter()
        ctx = await _context(api, key, after, wait)
        recalling = time.perf_counter()
        hits = await api.services.memory.recall(key.tenant, subject, question or "", agent)
        api.metrics.recall_seconds.observe(time.perf_counter() - recalling)
        api.metrics.context_seconds.labels("session").observe(time.perf_counter() - started)
        ctx.facts = [FactOut(**recalled_view(hit)) for hit in hits]
        ctx.rendered_facts = "".join(f"- {hit.fact.text}\n" for hit in hits)
        return ctx

    @app.post(
        "/v1/tenants/{tenant}/subjects/{subject}/facts",
        status_code=202,
        response_model=FactAccepted,
        dependencies=tenant_only,
    )
    async def remember(tenant: str, subject: str, body: FactIn, request: Request) -> FactAccepted:
        """Save a fact: by the subject by hand (seed 000 "/allay memory <text>"), or by an agent."""
        check_name("tenant", tenant)
        check_name("subject", subject)
        fact_id, position = await state(request).services.memory.remember(
            tenant,
            subject,
            body.text,
            agent=body.agent,
            scope=body.scope or ("agent" if body.agent else "shared"),
            source=body.source,
        )
        return FactAccepted(fact_id=fact_id, position=position.token())

    @app.get("/v1/tenants/{tenant}/subjects/{subject}/facts", response_model=FactsOut, dependencies=tenant_only)
    async def list_facts(
        tenant: str,
        subject: str,
        request: Request,
        after: str | None = after_query,
        wait: float | None = wait_query,
        agent: str | None = Query(default=None, description="Only what this agent recalls; all facts without it."),
        q: str | None = Query(default=None, description="Search: facts that share a word with it, best first."),
    ) -> FactsOut:
        """Every fact memlog keeps about the subject (seed 000 "/allay memory"): listable, searchable."""
        api = state(request)
        check_name("tenant", tenant)
        check_name("subject", subject)
        if after is not None:
            await _wait_all(api, after, wait)
        if q:
            hits = [hit for hit in await api.services.memory.recall(tenant, subject, q, agent) if hit.how != "recent"]
            facts = [FactOut(**recalled_view(hit)) for hit in hits]
        else:
            facts = [FactOut(**fact.view()) for fact in await api.services.memory.facts(tenant, subject, agent)]
        return FactsOut(tenant=tenant, subject=subject, facts=facts, limit=api.settings.facts_max)

    @app.patch(
        "/v1/tenants/{tenant}/subjects/{subject}/facts/{fact_id}",
        status_code=202,
        response_model=FactAccepted,
        dependencies=tenant_only,
    )
    async def revise(
        tenant: str, subject: str, fact_id: str, body: FactEdit, request: Request, after: str | None = after_query
    ) -> FactAccepted:
        """Edit a fact. `after` makes sure a fact just saved is seen first."""
        if after is not None:
            await _wait_all(state(request), after, None)
        position = await state(request).services.memory.revise(tenant, subject, fact_id, body.text, body.agent)
        return FactAccepted(fact_id=fact_id, position=position.token())

    @app.delete(
        "/v1/tenants/{tenant}/subjects/{subject}/facts/{fact_id}",
        status_code=202,
        response_model=FactAccepted,
        dependencies=tenant_only,
    )
    async def forget(
        tenant: str, subject: str, fact_id: str, request: Request, after: str | None = after_query
    ) -> FactAccepted:
        """Delete a fact; it influences no later read."""
        if after is not None:
            await _wait_all(state(request), after, None)
        position = await state(request).services.memory.forget(tenant, subject, fact_id, None)
        return FactAccepted(fact_id=fact_id, position=position.token())

    @app.delete(
        "/v1/tenants/{tenant}/subjects/{subject}/facts",
        status_code=202,
        response_model=FactAccepted,
        dependencies=tenant_only,
    )
    async def forget_all(tenant: str, subject: str, request: Request) -> FactAccepted:
        """Delete every fact (seed 000 "/allay forget")."""
        check_name("tenant", tenant)
        check_name("subject", subject)
        position = await state(request).services.memory.clear(tenant, subject)
        return FactAccepted(fact_id="*", position=position.token())

    @app.post("/v1/runs", status_code=202, response_model=RunAccepted)
    async def trace_run(body: RunIn, request: Request) -> RunAccepted:
        """Trace one run (seed 000, "Traces"): redacted before it is produced, sampled by run id."""
        guard_body(request, body.tenant)
        api = state(request)
        run = _run_event(api, body)
        traced = await api.services.producer.record_run(run, api.redactor)
        if traced is None:
            return RunAccepted(run_id=run.run_id, sampled=False, position=None, bytes=0)
        return RunAccepted(run_id=run.run_id, sampled=True, position=traced[0].token(), bytes=traced[1])

    @app.get("/v1/tenants/{tenant}/runs", dependencies=operator_only)
    async def runs(
        tenant: str,
        request: Request,
        agent: str | None = None,
        status: Literal["ok", "error"] | None = None,
        since: int | None = Query(default=None, ge=0, description="Started at or after (epoch ms)."),
        until: int | None = Query(default=None, ge=0, description="Started before (epoch ms)."),
        limit: int = Query(default=50, ge=1, le=500),
        after: str | None = after_query,
    ) -> dict[str, Any]:
        """Recent runs of a tenant, by shape only."""
        api = state(request)
        check_name("tenant", tenant)
        if after is not None:
            await _wait_all(api, after, None)
        docs = await api.services.traces.recent(
            tenant, now_ms(), agent=agent, status=status, since=since, until=until, limit=limit
        )
        return {"tenant": tenant, "runs": [{k: v for k, v in shape(d).items() if k != "timeline"} for d in docs]}

    @app.get("/v1/tenants/{tenant}/runs/{run_id}", dependencies=operator_only)
    async def run_shape(tenant: str, run_id: str, request: Request, after: str | None = after_query) -> JSONResponse:
        """One run's shape as a timeline: steps, models, tools, success, tokens, timings; never their text."""
        api = state(request)
        check_name("tenant", tenant)
        if after is not None:
            await _wait_all(api, after, None)
        doc = await api.services.traces.get(tenant, run_id, now_ms())
        if doc is None:
            return _error(404, None, f"no trace of run {run_id} in {tenant} (never traced, sampled out, or expired)")
        return JSONResponse(shape(doc))

    @app.get("/admin/traces", response_class=HTMLResponse, include_in_schema=False)
    async def traces_page() -> HTMLResponse:
        return HTMLResponse(TRACES_PAGE)

    @app.get("/v1/tools")
    async def tools() -> list[dict[str, Any]]:
        """The agent's memory tools, as function-calling definitions."""
        return TOOL_DEFINITIONS

    @app.post("/v1/tenants/{tenant}/subjects/{subject}/agents/{agent}/tools/{name}", dependencies=tenant_only)
    async def run_tool(
        tenant: str, subject: str, agent: str, name: str, body: ToolRunIn, request: Request
    ) -> dict[str, Any]:
        """Execute remember, recall or forget for an agent; with exchange_id the call joins the transcript."""
        api = state(request)
        check_name("tenant", tenant)
        check_name("subject", subject)
        check_name("agent", agent)
        return await api.services.memory.run_tool(
            tenant, subject, agent, name, body.arguments, exchange_id=body.exchange_id, call_index=body.call_index
        )

    @app.get("/v1/tenants/{tenant}/public/context", response_model=Context, dependencies=tenant_only)
    async def public_context(
        tenant: str, request: Request, after: str | None = after_query, wait: float | None = wait_query
    ) -> Context:
        """The tenant's public thread: every question prefixed with its asker's name, no tool results."""
        return await _context(state(request), ThreadKey.public(check_name("tenant", tenant)), after, wait)

    @app.get("/v1/tenants/{tenant}/agents/{agent}/context", response_model=Context, dependencies=tenant_only)
    async def automation_context(
        tenant: str, agent: str, request: Request, after: str | None = after_query, wait: float | None = wait_query
    ) -> Context:
        """An automation agent's own thread, apart from the subjects' sessions."""
        key = ThreadKey.automation(check_name("tenant", tenant), check_name("agent", agent))
        return await _context(state(request), key, after, wait)

    @app.post(
        "/v1/tenants/{tenant}/subjects/{subject}/reset",
        status_code=202,
        response_model=Accepted,
        dependencies=tenant_only,
    )
    async def reset(tenant: str, subject: str, request: Request, body: ResetIn | None = None) -> Accepted:
        """A new session (seed 000 "/allay new"): the exchanges leave the active session; memories stay."""
        api = state(request)
        env = Envelope(tenant=tenant, subject=subject, thread=SESSION_THREAD, producer=api.settings.producer_name)
        position = await api.services.producer.produce([ThreadReset(env, body.reason if body else None)])
        return Accepted(exchange_id="", position=position.token())

    @app.post(
        "/v1/tenants/{tenant}/subjects/{subject}/erase",
        response_model=PrivacyOut,
        dependencies=operator_only,
    )
    async def erase_subject(tenant: str, subject: str, request: Request, body: EraseIn | None = None) -> PrivacyOut:
        """Erase everything memlog holds about a subject, then their data key (operators only)."""
        api = state(request)
        request_id, position = await privacy.request(
            api.services,
            "erase",
            tenant,
            subject,
            requested_by=credentials.who(request.headers.get("authorization")),
            producer=api.settings.producer_name,
            reason=body.reason if body else None,
        )
        done = await _privacy_applied(api, position)
        api.services.sealer.forget()  # this process writes no more with the erased key
        entry = await api.services.ledger.get(request_id) if done else None
        return PrivacyOut(request_id=request_id, position=position.token(), done=done, ledger=_ledger_view(entry))

    @app.post("/v1/tenants/{tenant}/subjects/{subject}/export", dependencies=operator_only)
    async def export_subject(tenant: str, subject: str, request: Request) -> JSONResponse:
        """One JSON bundle of everything memlog holds about a subject (operators only)."""
        api = state(request)
        request_id, position = await privacy.request(
            api.services,
            "export",
            tenant,
            subject,
            requested_by=credentials.who(request.headers.get("authorization")),
            producer=api.settings.producer_name,
        )
        if not await _privacy_applied(api, position):
            out = PrivacyOut(request_id=request_id, position=position.token(), done=False)
            return JSONResponse(out.model_dump(), status_code=202)
        stored = await api.services.exports.get(request_id)
        if stored is None:
            raise NotCaughtUp(f"export {request_id} was applied but its bundle is gone")
        return Response(stored["bundle"], media_type="application/json")  # type: ignore[return-value]

    @app.get("/v1/tenants/{tenant}/exports/{request_id}", dependencies=operator_only)
    async def export_bundle(tenant: str, request_id: str, request: Request) -> Response:
        stored = await state(request).services.exports.get(request_id)
        if stored is None or stored["tenant"] != tenant:
            return _error(404, None, f"no export {request_id} (bundles are kept a day)")
        return Response(stored["bundle"], media_type="application/json")

    replays: dict[str, dict[str, Any]] = {}

    @app.post("/v1/replays", status_code=202, dependencies=operator_only)
    async def start_replay(body: ReplayIn, request: Request) -> dict[str, Any]:
        """Rebuild projections from the topics into a fresh namespace (all tenants; operators only)."""
        from streams.replay import Progress, replay
        from streams.worker import PROJECTIONS

        if any(item["state"] == "running" for item in replays.values()):
            raise Conflict("a replay is running already; follow it at GET /v1/replays/{replay_id}")
        replay_id = str(uuid.uuid4())
        item: dict[str, Any] = {"replay_id": replay_id, "state": "running", "events": 0, "total": None}
        replays[replay_id] = item
        by = credentials.who(request.headers.get("authorization"))
        which = PROJECTIONS if body.projection == "all" else (body.projection,)

        def watch(progress: Progress) -> None:
            item["progress"] = progress

        async def run() -> None:
            try:
                report = await replay(
                    settings,
                    which,
                    since_ms=body.since,
                    switch=body.switch,
                    out=io.StringIO(),
                    requested_by=by,
                    watch=watch,
                    workers=body.workers,
                )
                item.update(
                    state="done",
                    namespace=report.namespace,
                    previous=report.previous,
                    events=report.events,
                    seconds=round(report.seconds, 3),
                    switched=report.switched,
                    skipped_events=sum(report.skipped.values()),
                    skipped_because=sorted(set(report.reasons.values())),
                )
            except Exception as exc:  # reported to the operator who follows the replay
                log.exception("replay %s failed", replay_id)
                item.update(state="failed", error=f"{type(exc).__name__}: {exc}")

        item["task"] = asyncio.create_task(run())
        return {"replay_id": replay_id, "state": "running"}

    @app.get("/v1/replays/{replay_id}", dependencies=operator_only)
    async def replay_status(replay_id: str) -> dict[str, Any]:
        item = replays.get(replay_id)
        if item is None:
            return _error(404, None, f"no replay {replay_id} in this API process")  # type: ignore[return-value]
        progress = item.get("progress")
        view = {k: v for k, v in item.items() if k not in ("task", "progress")}
        if progress is not None and item["state"] == "running":
            view.update(events=progress.done, total=progress.total)
        return view

    @app.get("/v1/tenants/{tenant}/ledger", dependencies=operator_only)
    async def ledger(
        tenant: str, request: Request, subject: str | None = None, limit: int = Query(default=100, ge=1, le=1000)
    ) -> list[dict[str, Any]]:
        """Operator requests and what they did (erasure counts, never content)."""
        entries = await state(request).services.ledger.entries(tenant=tenant, subject=subject, limit=limit)
        return [view for entry in entries if (view := _ledger_view(entry)) is not None]

    # --- conversation archives (seed 004) ---------------------------------------------------------

    thread_path = "/v1/tenants/{tenant}/threads/{thread}"
    conversation_path = thread_path + "/conversations/{conversation}"

    def conversation_ref(tenant: str, thread: str, conversation: str = MAIN_CONVERSATION) -> ConversationRef:
        kind, owner = parse_thread(thread)
        return ConversationRef(check_name("tenant", tenant), kind, owner, check_name("conversation", conversation))

    async def wait_archive(api: ApiState, after: str | None, wait: float | None) -> None:
        if after is not None:
            for token in after.split(","):
                await _wait_applied(api, Position.parse(token.strip()), wait, archive=True)

    def operation(ref: ConversationRef, position: Position) -> OperationAccepted:
        return OperationAccepted(conversation=ref.conversation, position=position.token())

    @app.get(thread_path + "/conversations", dependencies=tenant_only)
    async def list_conversations(
        tenant: str, thread: str, request: Request, after: str | None = after_query, wait: float | None = wait_query
    ) -> dict[str, Any]:
        """The thread's conversations with their archive metadata; `main` is the current one."""
        api = state(request)
        ref = conversation_ref(tenant, thread)
        await wait_archive(api, after, wait)
        metas = await api.services.conversations.conversations(ref.tenant, ref.thread, ref.owner)
        return {"tenant": tenant, "thread": thread, "conversations": [m.view() for m in metas]}

    @app.get(thread_path + "/search", dependencies=tenant_only)
    async def search(
        tenant: str,
        thread: str,
        request: Request,
        q: str = Query(
            description="Exact phrase first, then ASCII token coverage (two tokens for a multi-term query)."
        ),
        scope: Literal["current", "history"] = Query(
            default="current",
            description="current: active and compacted history since the latest reset; "
            "history: the agent's whole history, reset archives included, labelled by provenance.",
        ),
        conversation: str | None = Query(default=None, description="One conversation; default: all of the thread."),
        since: int | None = Query(default=None, ge=0, description="Occurred at or after (epoch ms)."),
        until: int | None = Query(default=None, ge=0, description="Occurred before (epoch ms)."),
        neighbours: int = Query(default=1, ge=0, le=3, description="Entries either side of each result."),
        limit: int = Query(default=20, ge=1, le=200),
        cursor: str | None = Query(default=None, description="next_cursor of the previous page, same query."),
        after: str | None = after_query,
        wait: float | None = wait_query,
    ) -> dict[str, Any]:
        """Explicit search over the thread's archived originals (004, "Search and recall")."""
        api = state(request)
        ref = conversation_ref(tenant, thread)
        if conversation is not None:
            check_name("conversation", conversation)
        await wait_archive(api, after, wait)
        return await api.services.threads().search(
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
        )

    @app.get(conversation_path + "/export", dependencies=tenant_only)
    async def export(
        tenant: str,
        thread: str,
        conversation: str,
        request: Request,
        archives: Literal["current", "reset"] = Query(
            default="current",
            description="current: compacted generations since the latest reset plus the active entries; "
            "reset: the reset archives.",
        ),
        limit: int = Query(default=500, ge=1, le=500),
        cursor: str | None = None,
        after: str | None = after_query,
        wait: float | None = wait_query,
    ) -> dict[str, Any]:
        """The transcript from one snapshot: entries appended after the first page are not in it."""
        api = state(request)
        await wait_archive(api, after, wait)
        return await api.services.threads().export(
            conversation_ref(tenant, thread, conversation), archives=archives, limit=limit, cursor=cursor
        )

    @app.get(thread_path + "/entries/{entry_id}", dependencies=tenant_only)
    async def entry(
        tenant: str,
        thread: str,
        entry_id: str,
        request: Request,
        conversation: str | None = None,
        after: str | None = after_query,
        wait: float | None = wait_query,
    ) -> dict[str, Any]:
        """One entry with its original: the live entry first, then its archived occurrence."""
        api = state(request)
        ref = conversation_ref(tenant, thread)
        await wait_archive(api, after, wait)
        found = await api.services.threads().original(ref.tenant, ref.thread, ref.owner, entry_id, conversation)
        if found is None:
            raise NotFound(f"no entry {entry_id} in {thread}")
        return {**found.view(), "original": found.original}

    @app.get(thread_path + "/entries/{entry_id}/original", dependencies=tenant_only)
    async def original(
        tenant: str,
        thread: str,
        entry_id: str,
        request: Request,
        conversation: str | None = None,
        after: str | None = after_query,
        wait: float | None = wait_query,
    ) -> Response:
        """The JSON text exactly as it was received, byte for byte."""
        api = state(request)
        ref = conversation_ref(tenant, thread)
        await wait_archive(api, after, wait)
        found = await api.services.threads().original(ref.tenant, ref.thread, ref.owner, entry_id, conversation)
        if found is None:
            raise NotFound(f"no entry {entry_id} in {thread}")
        if found.original is None:
            raise NotFound(f"entry {entry_id} came with its exchange; its original is that of {found.exchange_id}.q")
        return Response(found.original.encode("utf-8"), media_type="application/json")

    @app.post(
        conversation_path + "/compact", status_code=202, response_model=OperationAccepted, dependencies=tenant_only
    )
    async def compact(tenant: str, thread: str, conversation: str, request: Request) -> OperationAccepted:
        """Fold the current conversation now (the session fold); the whole previous generation is archived first."""
        api = state(request)
        ref = conversation_ref(tenant, thread, conversation)
        if ref.conversation != MAIN_CONVERSATION:
            raise InvalidEvent(
                "conversation", "only the current conversation (main) is compacted; it is the one folded"
            )
        position = await api.services.folds.fold(ThreadKey(ref.tenant, ref.thread, ref.owner), force=True)
        if position is None:
            raise NothingToDo("nothing to compact: the session keeps its newest exchanges and has no older ones")
        return operation(ref, position)

    @app.post(conversation_path + "/reset", status_code=202, response_model=OperationAccepted, dependencies=tenant_only)
    async def reset_conversation(
        tenant: str, thread: str, conversation: str, request: Request, body: ResetIn | None = None
    ) -> OperationAccepted:
        """Clear the active transcript into a reset archive; reset is not erasure."""
        api = state(request)
        ref = conversation_ref(tenant, thread, conversation)
        return operation(ref, await api.services.threads().reset(ref, body.reason if body else None))

    @app.post(
        conversation_path + "/rename", status_code=202, response_model=OperationAccepted, dependencies=tenant_only
    )
    async def rename(
        tenant: str, thread: str, conversation: str, body: TargetIn, request: Request
    ) -> OperationAccepted:
        """Move the conversation's identity to `target`; payloads and archives move with it."""
        api = state(request)
        ref = conversation_ref(tenant, thread, conversation)
        return operation(ref, await api.services.threads().rename(ref, body.target))

    @app.post(conversation_path + "/fork", status_code=202, response_model=OperationAccepted, dependencies=tenant_only)
    async def fork(tenant: str, thread: str, conversation: str, body: TargetIn, request: Request) -> OperationAccepted:
        """Copy the newest MEMLOG_FORK_ENTRIES active entries to a new conversation; the source is unchanged."""
        api = state(request)
        ref = conversation_ref(tenant, thread, conversation)
        return operation(ref, await api.services.threads().fork(ref, body.target))

    @app.post(
        conversation_path + "/archive", status_code=202, response_model=OperationAccepted, dependencies=tenant_only
    )
    async def archive(
        tenant: str, thread: str, conversation: str, body: ArchiveIn, request: Request
    ) -> OperationAccepted:
        """Change archive metadata only (archived, protected, kind, label)."""
        api = state(request)
        ref = conversation_ref(tenant, thread, conversation)
        position = await api.services.threads().archive(
            ref, archived=body.archived, protected=body.protected, kind=body.kind, label=body.label
        )
        return operation(ref, position)

    @app.post(
        conversation_path + "/purge", status_code=202, response_model=OperationAccepted, dependencies=operator_only
    )
    async def purge(
        tenant: str, thread: str, conversation: str, request: Request, body: PurgeIn | None = None
    ) -> OperationAccepted:
        """Operators only: delete the conversation's authority and its archives."""
        api = state(request)
        ref = conversation_ref(tenant, thread, conversation)
        return operation(ref, await api.services.threads().purge(ref, body.reason if body else None))

    @app.post("/v1/tenants/{tenant}/retention", dependencies=operator_only)
    async def retention(tenant: str, request: Request, body: RetentionIn | None = None) -> dict[str, Any]:
        """Operators only: a dry run by default; with confirm, each target is re-checked, then purged."""
        api = state(request)
        check_name("tenant", tenant)
        run = body or RetentionIn()
        now = run.now if run.now is not None else now_ms()
        return await api.services.threads().retention(tenant, api.settings.retention_policy(), now, confirm=run.confirm)

    return app


async def _follow_namespace(api: ApiState) -> None:
    """Reads follow the namespace pointer: a finished replay moves them to the rebuilt namespace."""
    while True:
        try:
            if await api.services.follow_pointer():
                log.warning("reads switched to namespace %s", api.services.current.namespace)
        except StoreUnavailable as exc:
            log.warning("namespace pointer unreadable: %s", exc)
        await asyncio.sleep(1.0)


async def _privacy_applied(api: ApiState, position: Position) -> bool:
    try:
        await _wait_applied(api, position)
    except NotCaughtUp:
        return False
    return True


def _ledger_view(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    view = {("id" if k == "_id" else k): v for k, v in entry.items()}
    at = view.get("at")
    if isinstance(at, dt.datetime):
        view["at"] = at.isoformat()
    return view


def _envelope(api: ApiState, body: Routed, idempotency_key: str | None, thread: str) -> Envelope:
    if body.conversation is not None:
        check_name("conversation", body.conversation)
    return Envelope(
        tenant=body.tenant,
        subject=body.subject,
        agent=body.agent,
        thread=thread,
        producer=api.settings.producer_name,
        occurred_at=body.occurred_at if body.occurred_at is not None else now_ms(),
        idempotency_key=idempotency_key,
    )


async def _produce(api: ApiState, event: QuestionAsked | ToolCalled | AnswerGiven) -> Accepted:
    position = await api.services.producer.produce([event])
    return Accepted(exchange_id=event.exchange_id, position=position.token())


def _run_event(api: ApiState, body: RunIn) -> RunTraced:
    """The run as an event, with every step and call placed on one timeline."""
    order = sorted(
        [("step", i, s.seq, s.started_at) for i, s in enumerate(body.steps)]
        + [("tool", i, c.seq, c.started_at) for i, c in enumerate(body.tool_calls)],
        key=lambda item: (item[2] if item[2] is not None else -1, item[3]),
    )
    seqs = {(kind, index): seq if seq is not None else n for n, (kind, index, seq, _) in enumerate(order)}
    envelope = Envelope(
        tenant=body.tenant,
        subject=body.subject,
        agent=body.agent,
        thread=SESSION_THREAD if body.subject else AUTOMATION_THREAD,
        producer=api.settings.producer_name,
        occurred_at=body.ended_at,
    )
    steps = tuple(
        ModelStep(
            seqs[("step", i)], s.model, s.prompt, s.output, s.input_tokens, s.output_tokens, s.started_at, s.duration_ms
        )
        for i, s in enumerate(body.steps)
    )
    calls = tuple(
        TraceToolCall(
            seqs[("tool", i)],
            c.name,
            json_text(f"tool_calls[{i}].arguments", c.arguments),
            json_text(f"tool_calls[{i}].result", c.result),
            c.ok,
            c.started_at,
            c.duration_ms,
        )
        for i, c in enumerate(body.tool_calls)
    )
    return RunTraced(
        envelope, body.run_id or str(uuid.uuid4()), body.status, body.started_at, body.ended_at, steps, calls
    )


async def _wait_all(api: ApiState, after: str, wait: float | None) -> None:
    """`after` is one position token or several, comma-separated (an exchange and a fact, say)."""
    for token in after.split(","):
        await _wait_applied(api, Position.parse(token.strip()), wait)


async def _context(api: ApiState, key: ThreadKey, after: str | None, wait: float | None = None) -> Context:
    if after is not None:
        await _wait_all(api, after, wait)
    policy = api.settings.thread_policy()
    session = await api.services.sessions.read(key)
    if session is not None and session.head.tokens > policy.urgent_tokens:
        # seed 000: "Only a session past 42 000 tokens folds before the answer."
        try:
            folded = await api.services.folds.fold(key, urgent=True)
        except SummarizerFailed as exc:
            log.warning("urgent fold of %s failed; serving it unfolded: %s", key, exc)
            folded = None
        if folded is not None:
            await _wait_applied(api, folded)
            session = await api.services.sessions.read(key)
    session = session or Session()
    head = session.head
    return Context(
        tenant=key.tenant,
        subject=key.owner if key.thread == SESSION_THREAD else None,
        thread=key.thread,
        owner=key.owner,
        summary=head.summary,
        exchanges=[ExchangeOut(**exchange.view()) for exchange in session.exchanges],
        facts=[],
        tokens=head.tokens,
        fold_at_tokens=policy.fold_tokens,
        tokens_to_fold=max(0, policy.fold_tokens - head.tokens),
        exchanges_to_fold=max(0, policy.fold_exchanges - head.count),
        rendered=session.render(),
    )


async def _original(request: Request) -> str:
    """The request's JSON text exactly as received: escapes such as \\u0000 and \\ud800 stay as they were."""
    try:
        return (await request.body()).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEvent("body", f"is not UTF-8: {exc}") from None


async def _replayed(api: ApiState, claim: tuple[str, str, str, str], held: dict[str, Any]) -> Accepted:
    """A retry: the first answer, marked idempotent; a retry racing the first waits for it (bounded)."""
    deadline = time.monotonic() + api.settings.read_wait_seconds
    delay = 0.01
    while held.get("state") != "done":
        if time.monotonic() >= deadline:
            raise Conflict("an exchange with this idempotency key is being recorded; retry shortly")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.2)
        found = await api.services.idempotency.reserve(*claim, held.get("subject"))
        if found is None:  # the first attempt failed and let go of the key: this retry is not a replay
            await api.services.idempotency.release(*claim)
            raise Conflict("the first attempt with this idempotency key failed; retry it")
        held = found
    accepted = Accepted.model_validate(held["accepted"])
    accepted.idempotent = True
    return accepted


async def _wait_applied(api: ApiState, position: Position, wait: float | None = None, *, archive: bool = False) -> None:
    # every projection a read draws on must have applied the position
    checkpoints: list[Checkpoints]
    if position.topic == "threads" and archive:
        checkpoints = [api.services.archive_checkpoints]
    elif position.topic == "threads":
        checkpoints = [api.services.sessions, api.services.fact_activity]
    elif position.topic == "facts":
        checkpoints = [api.services.facts]
    elif position.topic == "traces":
        checkpoints = [api.services.traces]
    elif position.topic == "privacy":
        checkpoints = [api.services.current.privacy]
    else:
        raise InvalidEvent("after", f"{position.token()} is not a position of the threads, facts or traces topic")
    if position.partition >= api.settings.partitions:
        raise InvalidEvent("after", f"{position.token()} names a partition the topic does not have")
    limit = api.settings.read_wait_seconds
    deadline = time.monotonic() + (limit if wait is None else min(wait, limit))
    delay = 0.005
    while min([await c.applied(position.topic, position.partition) for c in checkpoints]) < position.offset:
        if time.monotonic() >= deadline:
            raise NotCaughtUp(f"the {position.topic} projection has not reached {position.token()} yet")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.1)


async def _lag_report(api: ApiState) -> dict[str, Any]:
    """Records not yet applied, per projection and partition; raises when Kafka, Redis or MongoDB is down."""
    services = api.services
    projections: list[tuple[str, str, Checkpoints]] = [
        ("sessions", "threads", services.sessions),
        ("facts-activity", "threads", services.fact_activity),
        ("archive", "threads", services.archive_checkpoints),
        ("facts", "facts", services.facts),
        ("traces", "traces", services.traces),
    ]
    partitions = [
        TopicPartition(api.settings.topic(short), p)
        for short in ("threads", "facts", "traces")
        for p in range(api.settings.partitions)
    ]
    try:
        ends = await api.offsets.end_offsets(partitions)
    except KafkaError as exc:
        raise LogUnavailable(f"kafka: {exc}") from exc
    lag: dict[str, int] = {}
    for name, short, checkpoints in projections:
        for p in range(api.settings.partitions):
            applied = await checkpoints.applied(short, p)
            lag[f"{name}/{short}.{p}"] = max(0, ends[TopicPartition(api.settings.topic(short), p)] - 1 - applied)
    dead = await services.counters.dead_letters()
    return {"lag": lag, "dead_letters": dead}
