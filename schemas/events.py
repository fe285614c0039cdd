"""memlog's events as typed values, and their mapping to and from Avro records.

Pure: no I/O. The Avro schemas under avro/ are the contract; these classes mirror them.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from schemas import envelope as _envelope
from schemas.errors import InvalidEvent
from schemas.frozen import quick
from schemas.limits import INT32_MAX, MAX_JSON_DEPTH, check_int, check_json

# the envelope and its checks (schemas.envelope), as every module imports them: from here
SESSION_THREAD = _envelope.SESSION_THREAD
PUBLIC_THREAD = _envelope.PUBLIC_THREAD
AUTOMATION_THREAD = _envelope.AUTOMATION_THREAD
THREADS = _envelope.THREADS
MAIN_CONVERSATION = _envelope.MAIN_CONVERSATION
MAX_NAME_LENGTH = _envelope.MAX_NAME_LENGTH
KEY_SEPARATOR = _envelope.KEY_SEPARATOR
now_ms = _envelope.now_ms
check_name = _envelope.check_name
check_text = _envelope.check_text
record_key = _envelope.record_key
Envelope = _envelope.Envelope

Channel = Literal["v1", "v2", "askx"]
CHANNELS: tuple[str, ...] = ("v1", "v2", "askx")


@quick
@dataclass(frozen=True)
class QuestionAsked:
    TYPE: ClassVar[str] = "memlog.QuestionAsked"
    envelope: Envelope
    exchange_id: str
    question: str
    channel: str = "v2"
    asker: str | None = None  # v2: display name, prefixed to public questions
    conversation: str | None = None  # v3: None is the thread's current conversation (main)
    original: str | None = None  # v3: the request's JSON text exactly as received
    tokens: int | None = None  # v4: token count of the text it adds to its session (schemas.session_text)

    def __post_init__(self) -> None:
        check_name("exchange_id", self.exchange_id)
        check_text("question", self.question)
        check_conversation(self.conversation)
        # the public thread prefixes the asker's name (or the subject's, or "someone"), and ": "
        check_tokens(self.tokens, len(self.question) + len(self.asker or self.envelope.subject or "someone") + 2)
        if self.asker is not None:
            check_name("asker", self.asker)
        if self.channel not in CHANNELS:
            raise InvalidEvent("channel", f"must be one of {', '.join(CHANNELS)}, not {self.channel!r}")


@quick
@dataclass(frozen=True)
class ToolCalled:
    TYPE: ClassVar[str] = "memlog.ToolCalled"
    envelope: Envelope
    exchange_id: str
    call_index: int
    name: str
    arguments: str  # JSON text
    result: str  # JSON text
    ok: bool = True
    duration_ms: int | None = None
    conversation: str | None = None  # v2
    original: str | None = None  # v2
    tokens: int | None = None  # v3: token count of "tool name(arguments): result" (schemas.session_text)

    def __post_init__(self) -> None:
        check_name("exchange_id", self.exchange_id)
        check_text("name", self.name)
        check_conversation(self.conversation)
        check_tokens(self.tokens, len(self.name) + len(self.arguments) + len(self.result) + 9)
        check_int("call_index", self.call_index, high=INT32_MAX)  # an Avro int
        for name in ("arguments", "result"):
            # also for events put on the log by others: deeper JSON would break every context read after
            try:
                value = json.loads(getattr(self, name))
            except RecursionError:
                raise InvalidEvent(name, f"is nested deeper than {MAX_JSON_DEPTH} levels") from None
            except (TypeError, ValueError) as exc:
                raise InvalidEvent(name, f"must be JSON text: {exc}") from None
            check_json(name, value)


@quick
@dataclass(frozen=True)
class AnswerGiven:
    TYPE: ClassVar[str] = "memlog.AnswerGiven"
    envelope: Envelope
    exchange_id: str
    answer: str
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    conversation: str | None = None  # v2
    original: str | None = None  # v2
    tokens: int | None = None  # v3: token count of the answer (schemas.session_text)

    def __post_init__(self) -> None:
        check_name("exchange_id", self.exchange_id)
        check_text("answer", self.answer, allow_empty=True)
        check_conversation(self.conversation)
        check_tokens(self.tokens, len(self.answer))


@quick
@dataclass(frozen=True)
class ThreadFolded:
    """A thread's oldest exchanges replaced by a summary.

    On a shared thread (public, automation) a fold is one event per asker, each a `segment`: the
    summary of that asker's lines alone, about them (`envelope.subject`) and so sealed under their
    key; erasing them takes their part of the summary away, in the stores and in every replay.
    """

    TYPE: ClassVar[str] = "memlog.ThreadFolded"
    envelope: Envelope
    fold_id: str
    summary: str
    covers: tuple[str, ...]
    summarizer: str
    urgent: bool = False
    segment: bool = False  # v3

    def __post_init__(self) -> None:
        check_name("fold_id", self.fold_id)
        if self.segment and self.envelope.thread == SESSION_THREAD:
            raise InvalidEvent("segment", "only a shared (public or automation) thread's summary has segments")
        if not self.covers and not self.segment:
            raise InvalidEvent("covers", "a fold covers at least one exchange")
        object.__setattr__(self, "covers", tuple(self.covers))  # Avro hands back a list


@quick
@dataclass(frozen=True)
class ThreadReset:
    TYPE: ClassVar[str] = "memlog.ThreadReset"
    envelope: Envelope
    reason: str | None = None
    conversation: str | None = None  # v2

    def __post_init__(self) -> None:
        check_conversation(self.conversation)


@quick
@dataclass(frozen=True)
class ThreadRenamed:
    """The conversation's identity moves to `target`; its entries and archives move with it (004)."""

    TYPE: ClassVar[str] = "memlog.ThreadRenamed"
    envelope: Envelope
    conversation: str
    target: str

    def __post_init__(self) -> None:
        check_name("conversation", self.conversation)
        check_name("target", self.target)
        if self.target == self.conversation:
            raise InvalidEvent("target", "is the conversation itself")


@quick
@dataclass(frozen=True)
class ThreadForked:
    """The newest `entries` active entries are copied to a new conversation; the source is unchanged (004)."""

    TYPE: ClassVar[str] = "memlog.ThreadForked"
    envelope: Envelope
    conversation: str
    target: str
    entries: int

    def __post_init__(self) -> None:
        check_name("conversation", self.conversation)
        check_name("target", self.target)
        if self.target == self.conversation:
            raise InvalidEvent("target", "is the source conversation itself")
        if isinstance(self.entries, bool) or not isinstance(self.entries, int) or self.entries < 1:
            raise InvalidEvent("entries", "must be a positive integer")


CONVERSATION_KINDS: tuple[str, ...] = ("main", "task", "subagent")


@quick
@dataclass(frozen=True)
class ThreadArchived:
    """Archive metadata changes (archived, protected, kind, label); entries do not (004)."""

    TYPE: ClassVar[str] = "memlog.ThreadArchived"
    envelope: Envelope
    conversation: str
    archived: bool | None = None
    protected: bool | None = None
    kind: str | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        check_name("conversation", self.conversation)
        if self.kind is not None and self.kind not in CONVERSATION_KINDS:
            raise InvalidEvent("kind", f"must be one of {', '.join(CONVERSATION_KINDS)}, not {self.kind!r}")


@quick
@dataclass(frozen=True)
class ThreadPurged:
    """The conversation's entries and archives are deleted (004: purge cascades to its archives)."""

    TYPE: ClassVar[str] = "memlog.ThreadPurged"
    envelope: Envelope
    conversation: str
    reason: str | None = None
    expect_last_seq: int | None = None  # retention: only while the newest entry is still this one
    # retention of main's older generations (v2): only what a fold or reset at this offset or before took
    # out of the transcript goes; the conversation and its transcript stay
    generations_until: int | None = None

    def __post_init__(self) -> None:
        check_name("conversation", self.conversation)


def check_tokens(tokens: int | None, chars: int) -> None:
    """A carried token count: none, or at most the UTF-8 bytes its text can hold (a token is at least one)."""
    if tokens is not None and check_int("tokens", tokens) > 4 * chars:
        raise InvalidEvent("tokens", f"is more than its text of {chars} characters can hold")


def check_conversation(value: str | None) -> None:
    if value is not None:
        check_name("conversation", value)


def conversation_of(event: object) -> str:
    """The conversation an event acts on; events without one belong to the thread's current one."""
    return getattr(event, "conversation", None) or MAIN_CONVERSATION


FACT_SCOPES: tuple[str, ...] = ("agent", "shared")
FACT_SOURCES: tuple[str, ...] = ("agent", "subject")


@quick
@dataclass(frozen=True)
class FactRemembered:
    TYPE: ClassVar[str] = "memlog.FactRemembered"
    envelope: Envelope
    fact_id: str
    scope: str
    text: str
    source: str = "agent"

    def __post_init__(self) -> None:
        check_name("fact_id", self.fact_id)
        check_text("text", self.text)
        if self.scope not in FACT_SCOPES:
            raise InvalidEvent("scope", f"must be one of {', '.join(FACT_SCOPES)}, not {self.scope!r}")
        if self.source not in FACT_SOURCES:
            raise InvalidEvent("source", f"must be one of {', '.join(FACT_SOURCES)}, not {self.source!r}")
        if self.scope == "agent" and self.envelope.agent is None:
            raise InvalidEvent("agent", "an agent-scoped fact needs the agent it belongs to")
        if self.envelope.subject is None and self.envelope.thread != PUBLIC_THREAD:
            # no subject: the tenant's own knowledge, which belongs to the tenant's public thread
            raise InvalidEvent("subject", "a fact is about a subject, or the tenant's (in its public thread)")


@quick
@dataclass(frozen=True)
class FactRevised:
    TYPE: ClassVar[str] = "memlog.FactRevised"
    envelope: Envelope
    fact_id: str
    text: str

    def __post_init__(self) -> None:
        check_name("fact_id", self.fact_id)
        check_text("text", self.text)


@quick
@dataclass(frozen=True)
class FactForgotten:
    TYPE: ClassVar[str] = "memlog.FactForgotten"
    envelope: Envelope
    fact_id: str

    def __post_init__(self) -> None:
        check_name("fact_id", self.fact_id)


@quick
@dataclass(frozen=True)
class FactsCleared:
    TYPE: ClassVar[str] = "memlog.FactsCleared"
    envelope: Envelope
    reason: str | None = None


FactEvent = FactRemembered | FactRevised | FactForgotten | FactsCleared

RUN_STATUSES: tuple[str, ...] = ("ok", "error")


@quick
@dataclass(frozen=True)
class ModelStep:
    seq: int
    model: str
    prompt: str
    output: str
    input_tokens: int
    output_tokens: int
    started_at: int
    duration_ms: int


@quick
@dataclass(frozen=True)
class TraceToolCall:
    seq: int
    name: str
    arguments: str  # JSON text
    result: str  # JSON text
    ok: bool
    started_at: int
    duration_ms: int


@quick
@dataclass(frozen=True)
class RunTraced:
    TYPE: ClassVar[str] = "memlog.RunTraced"
    envelope: Envelope
    run_id: str
    status: str
    started_at: int
    ended_at: int
    steps: tuple[ModelStep, ...] = ()
    tool_calls: tuple[TraceToolCall, ...] = ()
    exchange_id: str | None = None  # v3: the exchange whose tool call this run served (in envelope.thread)
    call_index: int | None = None  # v3: that call's place among the exchange's calls

    def __post_init__(self) -> None:
        check_name("run_id", self.run_id)
        if self.exchange_id is not None:
            check_name("exchange_id", self.exchange_id)
        if self.call_index is not None:
            if self.exchange_id is None:
                raise InvalidEvent("call_index", "names a call of an exchange: exchange_id is needed too")
            check_int("call_index", self.call_index, high=INT32_MAX)
        if self.status not in RUN_STATUSES:
            raise InvalidEvent("status", f"must be one of {', '.join(RUN_STATUSES)}, not {self.status!r}")
        if self.ended_at < self.started_at:
            raise InvalidEvent("ended_at", "is before started_at")
        steps = tuple(s if isinstance(s, ModelStep) else ModelStep(**s) for s in self.steps)
        calls = tuple(c if isinstance(c, TraceToolCall) else TraceToolCall(**c) for c in self.tool_calls)
        seqs = [(f"steps[{i}].seq", s.seq) for i, s in enumerate(steps)]
        seqs += [(f"tool_calls[{i}].seq", c.seq) for i, c in enumerate(calls)]
        for name, seq in seqs:
            check_int(name, seq, high=INT32_MAX)  # an Avro int
        object.__setattr__(self, "steps", steps)  # Avro hands back lists of dicts
        object.__setattr__(self, "tool_calls", calls)


RECEIPT_RESULTS: tuple[str, ...] = ("passed", "failed", "failed_expected", "not_run")
MAX_RECEIPT_DETAIL = 2000


@quick
@dataclass(frozen=True)
class ReceiptRecorded:
    """Seed 004, evidence you can check: the checked outcome of one tool call of an exchange (by its call
    index), or of the action the exchange's answer claims (`call_index` None)."""

    TYPE: ClassVar[str] = "memlog.ReceiptRecorded"
    envelope: Envelope
    receipt_id: str
    exchange_id: str
    call_index: int | None
    result: str
    detail: str | None = None

    def __post_init__(self) -> None:
        check_name("receipt_id", self.receipt_id)
        check_name("exchange_id", self.exchange_id)
        if self.call_index is not None:
            check_int("call_index", self.call_index, high=INT32_MAX)
        if self.result not in RECEIPT_RESULTS:
            raise InvalidEvent("result", f"must be one of {', '.join(RECEIPT_RESULTS)}, not {self.result!r}")
        if self.detail is not None:
            check_text("detail", self.detail, allow_empty=True)
            if len(self.detail) > MAX_RECEIPT_DETAIL:
                raise InvalidEvent("detail", f"is {len(self.detail)} characters; at most {MAX_RECEIPT_DETAIL}")


@quick
@dataclass(frozen=True)
class SubjectErased:
    """DESIGN "Erasure, export, replay": everything about the subject goes, then their data key."""

    TYPE: ClassVar[str] = "memlog.SubjectErased"
    envelope: Envelope
    request_id: str
    requested_by: str
    reason: str | None = None

    def __post_init__(self) -> None:
        check_name("request_id", self.request_id)
        if self.envelope.subject is None:
            raise InvalidEvent("subject", "an erasure names its subject")


@quick
@dataclass(frozen=True)
class SubjectExportRequested:
    TYPE: ClassVar[str] = "memlog.SubjectExportRequested"
    envelope: Envelope
    request_id: str
    requested_by: str

    def __post_init__(self) -> None:
        check_name("request_id", self.request_id)
        if self.envelope.subject is None:
            raise InvalidEvent("subject", "an export names its subject")


ExchangeEvent = QuestionAsked | ToolCalled | AnswerGiven
ThreadOperation = ThreadRenamed | ThreadForked | ThreadArchived | ThreadPurged
ThreadEvent = QuestionAsked | ToolCalled | AnswerGiven | ThreadFolded | ThreadReset | ThreadOperation
TraceEvent = RunTraced | ReceiptRecorded
TRACE_EVENTS: tuple[type[TraceEvent], ...] = (RunTraced, ReceiptRecorded)
THREAD_OPERATIONS: tuple[type[ThreadOperation], ...] = (ThreadRenamed, ThreadForked, ThreadArchived, ThreadPurged)
THREAD_EVENTS: tuple[type[ThreadEvent], ...] = (
    QuestionAsked,
    ToolCalled,
    AnswerGiven,
    ThreadFolded,
    ThreadReset,
    *THREAD_OPERATIONS,
)
FACT_EVENTS: tuple[type[FactEvent], ...] = (FactRemembered, FactRevised, FactForgotten, FactsCleared)
PrivacyEvent = SubjectErased | SubjectExportRequested
PRIVACY_EVENTS: tuple[type[PrivacyEvent], ...] = (SubjectErased, SubjectExportRequested)
Event = ThreadEvent | FactEvent | TraceEvent | PrivacyEvent
EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        QuestionAsked,
        ToolCalled,
        AnswerGiven,
        ThreadFolded,
        ThreadReset,
        ThreadRenamed,
        ThreadForked,
        ThreadArchived,
        ThreadPurged,
        FactRemembered,
        FactRevised,
        FactForgotten,
        FactsCleared,
        RunTraced,
        ReceiptRecorded,
        SubjectErased,
        SubjectExportRequested,
    )
}


def to_record(event: Event, schema_version: int = 1) -> dict[str, Any]:
    """The Avro record of an event."""
    env = event.envelope
    body = {
        name: ([_plain(item) for item in value] if isinstance(value, tuple) else value)
        for name, value in event.__dict__.items()
        if name != "envelope"
    }
    return {
        "envelope": {
            "event_id": env.event_id,
            "event_type": event.TYPE,
            "schema_version": schema_version,
            "tenant": env.tenant,
            "subject": env.subject,
            "agent": env.agent,
            "thread": env.thread,
            "occurred_at": env.occurred_at,
            "producer": env.producer,
            "idempotency_key": env.idempotency_key,
            "trace_id": env.trace_id,
        },
        **body,
    }


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _plain(value: Any) -> Any:
    return dict(value.__dict__) if hasattr(value, "__dataclass_fields__") else value


_MILLISECOND = dt.timedelta(milliseconds=1)


def millis(value: Any) -> int:
    """Epoch milliseconds of a decoded timestamp-millis, exactly (float timestamps round)."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return (aware - _EPOCH) // _MILLISECOND
    return int(value)


# each event type's fields besides its envelope, looked up once rather than for every record
_BODY_FIELDS: dict[type[Event], tuple[str, ...]] = {
    cls: tuple(name for name in cls.__dataclass_fields__ if name != "envelope") for cls in EVENT_TYPES.values()
}


def from_record(full_name: str, record: dict[str, Any]) -> Event:
    """The event of a decoded Avro record; validates it like a new one."""
    cls = EVENT_TYPES.get(full_name)
    if cls is None:
        raise InvalidEvent("event_type", f"{full_name} is not a memlog event")
    raw_env = record["envelope"]
    get = raw_env.get
    envelope = Envelope(
        tenant=raw_env["tenant"],
        thread=raw_env["thread"],
        producer=raw_env["producer"],
        subject=get("subject"),
        agent=get("agent"),
        occurred_at=millis(raw_env["occurred_at"]),
        event_id=str(raw_env["event_id"]),
        idempotency_key=get("idempotency_key"),
        trace_id=get("trace_id"),
    )
    fields = {name: record[name] for name in _BODY_FIELDS[cls] if name in record}
    return cls(envelope=envelope, **fields)


# json.dumps(value, separators=(",", ":"), ensure_ascii=False), without building an encoder for every call
compact_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def json_text(field_name: str, value: Any) -> str:
    """A JSON value as text, once it is known the stores can keep it (schemas.limits)."""
    check_json(field_name, value)
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidEvent(field_name, f"is not JSON-serialisable: {exc}") from None
