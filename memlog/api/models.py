"""The API's request and response bodies; requests convert into the use cases' typed values."""

from __future__ import annotations

import functools
import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from memlog.app.context import ThreadContext
from memlog.app.receipts import Receipt
from memlog.app.runs import Run, RunStep, RunToolCall
from memlog.config.settings import MAX_REPLAY_WORKERS
from schemas.exchanges import AnswerPart, QuestionPart, ReportedExchange, Route, ToolCallPart, ToolUse
from schemas.limits import INT32_MAX, INT64_MAX


@functools.cache
def _fields_holding(model: type[BaseModel], kind: type) -> frozenset[str]:
    """The fields of `model` that hold a `kind` (or None)."""

    def holds(annotation: Any) -> bool:
        if get_origin(annotation) in (Union, types.UnionType):
            return any(holds(arg) for arg in get_args(annotation))
        return annotation is kind

    return frozenset(name for name, info in model.model_fields.items() if holds(info.annotation))


class BodyIn(BaseModel):
    """A request body: an unknown field is refused, and so is `true` or `false` given for an integer and
    anything else given for `true` or `false` (pydantic would read them as 1 and 0, and 0, 1, "yes" and
    "off" as booleans: an exchange dated `false` would be kept as of 1970)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _json_types_kept_apart(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name
        if isinstance(value, bool) and name in _fields_holding(cls, int):
            raise PydanticCustomError("int_type", "is {value}, not an integer", {"value": str(value).lower()})
        if value is not None and not isinstance(value, bool) and name in _fields_holding(cls, bool):
            raise PydanticCustomError("bool_type", "must be true or false")
        return value


class ToolCallIn(BodyIn):
    name: str
    arguments: Any = Field(default_factory=dict, description="Any JSON value.")
    result: Any = Field(default=None, description="Any JSON value; kept whole so follow-ups need no second call.")
    ok: bool = True
    duration_ms: int | None = Field(default=None, ge=0, le=INT64_MAX)

    def to_tool_use(self) -> ToolUse:
        return ToolUse(self.name, self.arguments, self.result, self.ok, self.duration_ms)


class ExchangeIn(BodyIn):
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
    occurred_at: int | None = Field(
        default=None, ge=0, le=INT64_MAX, description="Epoch milliseconds; defaults to now."
    )
    agent: str | None = None
    model: str | None = None
    exchange_id: str | None = Field(default=None, description="Your own id for it; default: a new one.")
    conversation: str | None = Field(
        default=None, description="The conversation of the thread; default: its current one (main)."
    )

    def to_exchange(self, original: str) -> ReportedExchange:
        """`original`: the request's JSON text exactly as received."""
        return ReportedExchange(
            route=Route(self.tenant, self.subject, self.thread, self.agent, self.conversation, self.occurred_at),
            question=self.question,
            tool_calls=tuple(call.to_tool_use() for call in self.tool_calls),
            answer=self.answer,
            channel=self.channel,
            asker=self.asker,
            model=self.model,
            idempotency_key=self.idempotency_key,
            exchange_id=self.exchange_id,
            original=original,
        )


class Routed(BodyIn):
    tenant: str
    subject: str
    occurred_at: int | None = Field(default=None, ge=0, le=INT64_MAX)
    agent: str | None = None
    conversation: str | None = None

    def route(self, thread: str) -> Route:
        return Route(self.tenant, self.subject, thread, self.agent, self.conversation, self.occurred_at)


class QuestionIn(Routed):
    thread: Literal["session", "public", "automation"] = "session"
    asker: str | None = None
    question: str
    channel: Literal["v1", "v2", "askx"] = "v2"
    idempotency_key: str | None = None

    def to_part(self, original: str) -> QuestionPart:
        return QuestionPart(
            self.route(self.thread), self.question, self.channel, self.asker, self.idempotency_key, original
        )


class ToolCallEventIn(Routed):
    thread: Literal["session", "public", "automation"] = "session"
    call_index: int = Field(ge=0, le=INT32_MAX, description="Order of the call within the exchange, from 0.")
    name: str
    arguments: Any = Field(default_factory=dict)
    result: Any = None
    ok: bool = True
    duration_ms: int | None = Field(default=None, ge=0, le=INT64_MAX)

    def to_part(self, original: str) -> ToolCallPart:
        call = ToolUse(self.name, self.arguments, self.result, self.ok, self.duration_ms)
        return ToolCallPart(self.route(self.thread), self.call_index, call, original)


class AnswerIn(Routed):
    thread: Literal["session", "public", "automation"] = "session"
    answer: str
    model: str | None = None

    def to_part(self, original: str) -> AnswerPart:
        return AnswerPart(self.route(self.thread), self.answer, self.model, original)


class Accepted(BaseModel):
    exchange_id: str
    position: str
    idempotent: bool = False


ReceiptResult = Literal["passed", "failed", "failed_expected", "not_run"]


class ToolCallOut(BaseModel):
    call_index: int = Field(description="The call's place among the exchange's calls, from 0.")
    name: str
    arguments: Any
    result: Any
    ok: bool
    duration_ms: int | None
    called_at: int | None = Field(default=None, description="When the call was made (epoch ms).")
    status: Literal["ok", "error", "pending", "incomplete"] = Field(
        default="ok",
        description="ok or error: the call answered; pending: no result yet; incomplete: no result "
        "MEMLOG_TOOL_RESULT_TIMEOUT_SECONDS after the call (seed 004, evidence and completion).",
    )
    run_id: str | None = Field(default=None, description="The traced run that served this call (POST /v1/runs).")
    receipt: ReceiptResult | None = Field(
        default=None, description="The result of the newest receipt for this call (POST /v1/receipts); null: none."
    )


class ExchangeOut(BaseModel):
    exchange_id: str
    question: str
    tool_calls: list[ToolCallOut]
    answer: str | None
    channel: str
    occurred_at: int
    complete: bool
    line: str | None = Field(description="askx exchanges: the one line they land as (seed 000).")
    run_id: str | None = Field(default=None, description="A traced run that served the exchange, naming no call.")
    receipt: ReceiptResult | None = Field(
        default=None, description="The newest receipt for the action the answer claims (a receipt naming no call)."
    )
    answer_state: Literal["verified", "unverified", "incomplete"] | None = Field(
        default=None,
        description="verified: every call the answer relies on (and its claimed action, once a receipt names it) "
        "has a receipt that passed or failed as expected; unverified: some have none, or one that failed or was "
        "not run; incomplete: a call never answered; null: no answer yet, or nothing to check (seed 004).",
    )


class SummaryNotice(BaseModel):
    """What a lossy summary folded away, and the search that recovers the exact words (seed 004)."""

    lossy: bool = Field(description="Always true: a fold keeps a recap, not the words.")
    summarizer: str = Field(description="What wrote the summary as it stands: `extractive` or `openai:<model>`.")
    folded_exchanges: int = Field(description="Exchanges folded into the summary so far (since the last reset).")
    folded_tokens: int = Field(description="Their tokens (tiktoken), as the thread counted them.")
    complete: bool = Field(
        description="False when part of the summary was folded before memlog recorded folds: "
        "the counts are then a lower bound and `since` is null."
    )
    search: str = Field(
        description="This thread's search route, ending in `q=`: append the URL-encoded words. "
        "It finds the folded exchanges' exact words in the archive."
    )
    since: int | None = Field(description="The earliest folded exchange (epoch ms), null when unknown.")
    until: int | None = Field(description="The latest folded exchange (epoch ms).")


class Context(BaseModel):
    tenant: str
    subject: str | None
    thread: str
    owner: str
    summary: str
    exchanges: list[ExchangeOut]
    facts: list[FactOut] = Field(
        description="The best MEMLOG_RECALL_LIMIT lasting facts for the question (seed 003): those that bear on it "
        "first (bears), then the others held, not matched to it."
    )
    tokens: int = Field(description="Tokens the thread holds (exchanges and summary), counted with tiktoken.")
    fold_at_tokens: int
    tokens_to_fold: int = Field(description="How far the thread is from the next fold, in tokens.")
    exchanges_to_fold: int = Field(description="How far the thread is from the next fold, in exchanges.")
    rendered: str = Field(description="The context as one text; between folds it only grows at the end.")
    rendered_facts: str = Field(
        default="",
        description="The facts as lines, to put under a heading of their own: those that bear on the question, "
        "then a line 'Other facts you hold about <subject>, not matched to the question:' and the others.",
    )
    summary_notice: SummaryNotice | None = Field(
        default=None,
        description="The summary's loss notice, also shown once in `rendered` at the summary; "
        "null when nothing has been folded (or only before memlog recorded folds).",
    )

    @classmethod
    def of(cls, context: ThreadContext) -> Context:
        return cls.model_validate(vars(context))


class FactIn(BodyIn):
    text: str
    scope: Literal["agent", "shared"] | None = Field(
        default=None,
        description="agent: only that agent recalls it; shared: every agent of the tenant. "
        "Default: agent when an agent is given, else shared.",
    )
    agent: str | None = Field(default=None, description="The agent that saves it (needed for scope agent).")
    source: Literal["agent", "subject"] = Field(default="subject", description="Saved by the agent or by hand.")
    idempotency_key: str | None = Field(
        default=None, description="As the Idempotency-Key header: a retry with it saves nothing twice."
    )


class KnowledgeIn(BodyIn):
    text: str
    scope: Literal["agent", "shared"] | None = Field(
        default=None,
        description="agent: only that agent recalls it (for every subject); shared: every agent of the tenant. "
        "Default: agent when an agent is given, else shared.",
    )
    agent: str | None = Field(default=None, description="The agent it is for (needed for scope agent).")
    idempotency_key: str | None = Field(
        default=None, description="As the Idempotency-Key header: a retry with it saves nothing twice."
    )


class FactEdit(BodyIn):
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
    score: float | None = Field(
        default=None,
        description="Estimated probability (0 to 1) that the fact bears on the question; 0 for a recent fill-in.",
    )
    how: str | None = Field(
        default=None,
        description="keyword (a word matched; no model), similarity (meaning only), both, or recent (one of the "
        "newest facts, given after those the question matched).",
    )
    bears: bool | None = Field(
        default=None,
        description="True when the score is at or above MEMLOG_RECALL_FLOOR: the fact bears on the question. The "
        "others are given after those that do, as facts held but not matched to the question.",
    )
    belongs_to: Literal["subject", "tenant"] = Field(
        default="subject", description="subject: a fact about the subject; tenant: the tenant's knowledge."
    )


class FactAccepted(BaseModel):
    fact_id: str
    position: str
    transcript_position: str | None = Field(
        default=None, description="Where the session's remember call lost the forgotten fact's text, if it did."
    )


class FactsOut(BaseModel):
    tenant: str
    subject: str | None = Field(description="None for the tenant's own knowledge.")
    facts: list[FactOut]
    limit: int = Field(description="The most facts kept here.")
    next_cursor: str | None = Field(default=None, description="With q: the cursor of the next page of matches.")


class ToolRunIn(BodyIn):
    arguments: dict[str, Any] = Field(default_factory=dict)
    exchange_id: str | None = Field(default=None, description="Record the call in this exchange's transcript.")
    call_index: int | None = Field(
        default=None, ge=0, le=INT32_MAX, description="Its place among the exchange's tool calls."
    )
    idempotency_key: str | None = Field(
        default=None, description="As the Idempotency-Key header: a retry with it saves nothing twice."
    )


class ModelStepIn(BodyIn):
    seq: int | None = Field(
        default=None, ge=0, le=INT32_MAX, description="Place in the timeline; default: by start time."
    )
    model: str
    prompt: str
    output: str
    input_tokens: int = Field(ge=0, le=INT64_MAX)
    output_tokens: int = Field(ge=0, le=INT64_MAX)
    started_at: int = Field(ge=0, le=INT64_MAX)
    duration_ms: int = Field(ge=0, le=INT64_MAX)


class TraceToolCallIn(BodyIn):
    seq: int | None = Field(default=None, ge=0, le=INT32_MAX)
    name: str
    arguments: Any = Field(default_factory=dict)
    result: Any = None
    ok: bool = True
    started_at: int = Field(ge=0, le=INT64_MAX)
    duration_ms: int = Field(ge=0, le=INT64_MAX)


class RunIn(BodyIn):
    tenant: str
    subject: str | None = None
    agent: str
    run_id: str | None = None
    status: Literal["ok", "error"]
    started_at: int = Field(ge=0, le=INT64_MAX)
    ended_at: int = Field(ge=0, le=INT64_MAX)
    steps: list[ModelStepIn] = Field(default_factory=list)
    tool_calls: list[TraceToolCallIn] = Field(default_factory=list)
    exchange_id: str | None = Field(
        default=None, description="The exchange whose tool call this run served; its tool call then shows run_id."
    )
    call_index: int | None = Field(
        default=None, ge=0, le=INT32_MAX, description="That tool call's place among the exchange's calls, from 0."
    )
    thread: Literal["session", "public", "automation"] | None = Field(
        default=None,
        description="The exchange's thread (with exchange_id); default: the subject's session, else the agent's "
        "automation thread.",
    )

    def to_run(self) -> Run:
        steps = tuple(
            RunStep(s.seq, s.model, s.prompt, s.output, s.input_tokens, s.output_tokens, s.started_at, s.duration_ms)
            for s in self.steps
        )
        calls = tuple(
            RunToolCall(c.seq, c.name, c.started_at, c.duration_ms, c.arguments, c.result, c.ok)
            for c in self.tool_calls
        )
        return Run(
            self.tenant,
            self.subject,
            self.agent,
            self.run_id,
            self.status,
            self.started_at,
            self.ended_at,
            steps,
            calls,
            exchange_id=self.exchange_id,
            call_index=self.call_index,
            thread=self.thread,
        )


class ReceiptIn(BodyIn):
    tenant: str
    subject: str | None = None
    agent: str
    exchange_id: str = Field(description="The exchange whose tool call (or claimed action) was checked.")
    call_index: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="The checked call's place among the exchange's calls, from 0; null: the action the answer "
        "claims as a whole.",
    )
    result: ReceiptResult
    detail: str | None = Field(
        default=None, max_length=2000, description="What the check saw; redacted, then sealed under the subject's key."
    )
    receipt_id: str | None = Field(default=None, description="Default: a new one.")
    thread: Literal["session", "public", "automation"] | None = Field(
        default=None,
        description="The exchange's thread; default: the subject's session, else the agent's automation thread.",
    )
    recorded_at: int | None = Field(default=None, ge=0, le=INT64_MAX, description="Epoch ms; default: now.")

    def to_receipt(self) -> Receipt:
        return Receipt(
            self.tenant,
            self.subject,
            self.agent,
            self.exchange_id,
            self.call_index,
            self.result,
            self.detail,
            self.receipt_id,
            self.thread,
            self.recorded_at,
        )


class ReceiptAccepted(BaseModel):
    receipt_id: str
    position: str = Field(description="Pass as `after` to a read that must show the receipt.")


class RunAccepted(BaseModel):
    run_id: str
    sampled: bool = Field(description="False: TRACE_SAMPLE left this run out; nothing was produced.")
    position: str | None
    bytes: int


class ResetIn(BodyIn):
    reason: str | None = None


class EraseIn(BodyIn):
    reason: str | None = Field(default=None, description="Recorded in the log; do not put personal data here.")


class ReplayIn(BodyIn):
    projection: Literal["sessions", "facts", "traces", "archives", "all"] = "all"
    since: int | None = Field(
        default=None, ge=0, le=INT64_MAX, description="Epoch ms to start from; default: the beginning."
    )
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


class TargetIn(BodyIn):
    target: str = Field(description="The new conversation's name; it must not exist, nor be the source.")


class ArchiveIn(BodyIn):
    archived: bool | None = None
    protected: bool | None = Field(default=None, description="Protected conversations are never deleted by retention.")
    kind: Literal["main", "task", "subagent"] | None = Field(default=None, description="The retention policy.")
    label: str | None = None


class PurgeIn(BodyIn):
    reason: str | None = None


class RetentionIn(BodyIn):
    confirm: bool = Field(default=False, description="Without it, a dry run: the targets only.")
    now: int | None = Field(default=None, ge=0, le=INT64_MAX, description="Epoch ms to plan against; default: now.")


class OperationAccepted(BaseModel):
    conversation: str
    position: str
