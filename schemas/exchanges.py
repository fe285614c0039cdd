"""One exchange (question, tool calls, answer) as typed values, and the one builder of its events.

The HTTP API validates a request once with pydantic and converts it into these values; Python
callers that hold a plain dict convert it with `ReportedExchange.from_payload`. Either way the events are
built here, whole (`exchange_events`) or one streamed part at a time (`part_event`), so every face
refuses the same input naming the same field. Given the session's tokenizer (`count_tokens`), each
event carries the token count of the text it adds to its session (schemas.session_text), so the
projections never count it again. Pure: no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.errors import InvalidEvent
from schemas.events import (
    KEY_SEPARATOR,
    SESSION_THREAD,
    AnswerGiven,
    Envelope,
    ExchangeEvent,
    QuestionAsked,
    ToolCalled,
    check_name,
    check_text,
    json_text,
    now_ms,
)
from schemas.session_text import TokenCount, count_of, question_text, tool_call_text

EXCHANGE_FIELDS = frozenset(
    {
        "tenant",
        "subject",
        "question",
        "tool_calls",
        "answer",
        "channel",
        "idempotency_key",
        "occurred_at",
        "agent",
        "model",
        "trace_id",
        "exchange_id",
        "thread",
        "asker",
        "conversation",
        "original",
    }
)
TOOL_CALL_FIELDS = frozenset({"name", "arguments", "result", "ok", "duration_ms"})


@dataclass(frozen=True)
class Route:
    """Where an exchange's events go: the thread they belong to and when they happened."""

    tenant: str
    subject: str
    thread: str = SESSION_THREAD
    agent: str | None = None
    conversation: str | None = None  # None: the thread's current conversation (main)
    occurred_at: int | None = None  # epoch milliseconds; None: now


@dataclass(frozen=True)
class ToolUse:
    """One tool call as the backend reports it; arguments and result are any JSON values."""

    name: str
    arguments: Any = field(default_factory=dict)
    result: Any = None
    ok: bool = True
    duration_ms: int | None = None


@dataclass(frozen=True)
class ReportedExchange:
    route: Route
    question: str
    tool_calls: tuple[ToolUse, ...] = ()
    answer: str | None = None
    channel: str = "v2"
    asker: str | None = None
    model: str | None = None
    idempotency_key: str | None = None
    trace_id: str | None = None
    exchange_id: str | None = None  # None: derived from the idempotency key, else a new one
    original: str | None = None  # the request's JSON text exactly as received

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ReportedExchange:
        """A plain dict's exchange, for callers without the API's pydantic models.

        Checks only what the typed values promise (fields and their types); the rules on names and
        texts are checked once, when the events are built.
        """
        if not isinstance(payload, Mapping):
            raise InvalidEvent("body", "must be a JSON object")
        unknown = sorted(set(payload) - EXCHANGE_FIELDS)
        if unknown:
            raise InvalidEvent(unknown[0], "is not a field of an exchange")
        answer = payload.get("answer")
        original = payload.get("original")
        if original is not None and not isinstance(original, str):
            raise InvalidEvent("original", "must be the JSON text as received")
        occurred_at = payload.get("occurred_at")
        if occurred_at is not None and (
            isinstance(occurred_at, bool) or not isinstance(occurred_at, int) or occurred_at < 0
        ):
            raise InvalidEvent("occurred_at", "must be epoch milliseconds (a non-negative integer)")
        calls = payload.get("tool_calls") or []
        if not isinstance(calls, list):
            raise InvalidEvent("tool_calls", "must be a list")
        return cls(
            route=Route(
                tenant=payload.get("tenant", ""),  # names are checked once, when the envelope is built
                subject=payload.get("subject", ""),
                thread=str(payload.get("thread") or SESSION_THREAD),
                agent=payload.get("agent"),
                conversation=payload.get("conversation"),
                occurred_at=occurred_at,
            ),
            question=check_text("question", payload.get("question")),
            tool_calls=tuple(_tool_use(f"tool_calls[{index}]", call) for index, call in enumerate(calls)),
            answer=None if answer is None else check_text("answer", answer, allow_empty=True),
            channel=str(payload.get("channel") or "v2"),
            asker=payload.get("asker"),
            model=payload.get("model"),
            idempotency_key=payload.get("idempotency_key"),
            trace_id=payload.get("trace_id"),
            exchange_id=payload.get("exchange_id"),
            original=original,
        )


def _tool_use(where: str, call: object) -> ToolUse:
    if not isinstance(call, Mapping):
        raise InvalidEvent(where, "must be an object")
    extra = sorted(set(call) - TOOL_CALL_FIELDS)
    if extra:
        raise InvalidEvent(f"{where}.{extra[0]}", "is not a field of a tool call")
    ok = call.get("ok", True)
    if not isinstance(ok, bool):
        raise InvalidEvent(f"{where}.ok", "must be true or false")
    duration = call.get("duration_ms")
    if duration is not None and (isinstance(duration, bool) or not isinstance(duration, int) or duration < 0):
        raise InvalidEvent(f"{where}.duration_ms", "must be a non-negative integer")
    name = check_text(f"{where}.name", call.get("name"))
    return ToolUse(name, call.get("arguments", {}), call.get("result"), ok, duration)


@dataclass(frozen=True)
class QuestionPart:
    """The question of an exchange whose parts are streamed, sent before the answer is known."""

    route: Route
    question: str
    channel: str = "v2"
    asker: str | None = None
    idempotency_key: str | None = None
    original: str | None = None


@dataclass(frozen=True)
class ToolCallPart:
    route: Route
    call_index: int  # the call's place within the exchange, from 0
    call: ToolUse
    original: str | None = None


@dataclass(frozen=True)
class AnswerPart:
    route: Route
    answer: str
    model: str | None = None
    original: str | None = None


ExchangePart = QuestionPart | ToolCallPart | AnswerPart

# Counting tokens takes about 0.17 ms a KB (cl100k_base, one core): an exchange whose text is longer than
# this is built off the event loop (tiktoken releases the GIL), so a large tool result holds up no other request.
OFF_LOOP_CHARS = 16_384


def text_size(item: ReportedExchange | ExchangePart) -> int:
    """About how many characters building `item`'s events counts: its JSON text as received when known;
    else its texts, a tool call (JSON values, not yet text) counted as large."""
    if item.original is not None:
        return len(item.original)
    if isinstance(item, ReportedExchange):
        return len(item.question) + len(item.answer or "") + (OFF_LOOP_CHARS if item.tool_calls else 0)
    if isinstance(item, QuestionPart):
        return len(item.question)
    if isinstance(item, AnswerPart):
        return len(item.answer)
    return OFF_LOOP_CHARS


def exchange_events(
    exchange: ReportedExchange, *, producer: str, now: int | None = None, count_tokens: TokenCount | None = None
) -> list[ExchangeEvent]:
    """The exchange's events, in order, sharing one exchange id and one batch's routing; with
    `count_tokens`, each carrying its text's count."""
    route = exchange.route
    key = exchange.idempotency_key
    envelope = _envelope(route, producer, key, exchange.trace_id, now)
    exchange_id = exchange.exchange_id
    if exchange_id is None:  # "" is not absent: the events refuse it by name, as any empty id
        exchange_id = exchange_id_for(route.tenant, route.subject, key)
    count = count_tokens
    events: list[ExchangeEvent] = [
        _question(
            envelope, exchange_id, route, exchange.question, exchange.channel, exchange.asker, exchange.original, count
        )
    ]
    for index, call in enumerate(exchange.tool_calls):
        events.append(_tool_call(_next(envelope), exchange_id, route, index, call, None, count, f"tool_calls[{index}]"))
    if exchange.answer is not None:
        events.append(_answer(_next(envelope), exchange_id, route, exchange.answer, exchange.model, None, count))
    return events


def part_event(
    exchange_id: str, part: ExchangePart, *, producer: str, count_tokens: TokenCount | None = None
) -> ExchangeEvent:
    """The event of one streamed part; only the question carries the idempotency key."""
    route = part.route
    count = count_tokens
    if isinstance(part, QuestionPart):
        envelope = _envelope(route, producer, part.idempotency_key)
        return _question(envelope, exchange_id, route, part.question, part.channel, part.asker, part.original, count)
    if isinstance(part, ToolCallPart):
        envelope = _envelope(route, producer)
        return _tool_call(envelope, exchange_id, route, part.call_index, part.call, part.original, count)
    return _answer(_envelope(route, producer), exchange_id, route, part.answer, part.model, part.original, count)


def exchange_id_for(tenant: str, subject: str, idempotency_key: str | None) -> str:
    """A retried exchange with the same idempotency key gets the same id, so the projection keeps it once."""
    if idempotency_key is None:
        return str(uuid.uuid4())
    return str(
        uuid.uuid5(uuid.NAMESPACE_URL, f"memlog:{tenant}{KEY_SEPARATOR}{subject}{KEY_SEPARATOR}{idempotency_key}")
    )


def encodable(text: str) -> str:
    """The text with lone surrogates (valid in JSON escapes, not in UTF-8) replaced by U+FFFD.

    Only the structured fields are cleaned; the original JSON text keeps its escapes as received.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _envelope(
    route: Route, producer: str, key: str | None = None, trace_id: str | None = None, now: int | None = None
) -> Envelope:
    if key is not None:
        check_name("idempotency_key", key)
    occurred_at = route.occurred_at
    if occurred_at is None:
        occurred_at = now if now is not None else now_ms()
    return Envelope(
        tenant=route.tenant,
        subject=route.subject,
        agent=route.agent,
        thread=route.thread,
        producer=producer,
        occurred_at=occurred_at,
        idempotency_key=key,
        trace_id=trace_id,
    )


def _next(envelope: Envelope) -> Envelope:
    """The envelope of the next event of the same exchange: same routing, a fresh event id."""
    return Envelope(
        tenant=envelope.tenant,
        subject=envelope.subject,
        agent=envelope.agent,
        thread=envelope.thread,
        producer=envelope.producer,
        occurred_at=envelope.occurred_at,
        idempotency_key=envelope.idempotency_key,
        trace_id=envelope.trace_id,
    )


def _question(
    envelope: Envelope,
    exchange_id: str,
    route: Route,
    question: str,
    channel: str,
    asker: str | None,
    original: str | None,
    count: TokenCount | None,
) -> QuestionAsked:
    text = encodable(question)
    shown = question_text(text, thread=envelope.thread, asker=asker, subject=envelope.subject)
    return QuestionAsked(
        envelope,
        exchange_id,
        text,
        channel,
        asker,
        conversation=route.conversation,
        original=original,
        tokens=count_of(shown, count),
    )


def _tool_call(
    envelope: Envelope,
    exchange_id: str,
    route: Route,
    index: int,
    call: ToolUse,
    original: str | None,
    count: TokenCount | None,
    where: str = "",
) -> ToolCalled:
    """`where` prefixes the fields an error names: a whole exchange's calls are `tool_calls[i]`."""

    def named(name: str) -> str:
        return f"{where}.{name}" if where else name

    try:
        name = encodable(call.name)
        arguments = encodable(json_text(named("arguments"), call.arguments))
        result = encodable(json_text(named("result"), call.result))
        return ToolCalled(
            envelope=envelope,
            exchange_id=exchange_id,
            call_index=index,
            name=name,
            arguments=arguments,
            result=result,
            ok=call.ok,
            duration_ms=call.duration_ms,
            conversation=route.conversation,
            original=original,
            tokens=count_of(tool_call_text(name, arguments, result), count),
        )
    except InvalidEvent as exc:
        if not where or exc.field.startswith(where):
            raise
        raise InvalidEvent(named(exc.field), exc.problem) from None


def _answer(
    envelope: Envelope,
    exchange_id: str,
    route: Route,
    answer: str,
    model: str | None,
    original: str | None,
    count: TokenCount | None,
) -> AnswerGiven:
    text = encodable(answer)
    return AnswerGiven(
        envelope,
        exchange_id,
        text,
        model=None if model is None else encodable(model),
        conversation=route.conversation,
        original=original,
        tokens=count_of(text, count),
    )
