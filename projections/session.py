"""The subject's session: pure rules that fold thread events into exchanges (seed 000, "The session").

No I/O here. The agent loads what the rule needs, calls it, and hands the result to a store.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from projections.position import Position
from schemas.events import SESSION_THREAD, AnswerGiven, QuestionAsked, ThreadEvent, ToolCalled

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class SessionKey:
    tenant: str
    subject: str


@dataclass(frozen=True)
class ToolCall:
    call_index: int
    name: str
    arguments: str  # JSON text, as received
    result: str  # JSON text, as received
    ok: bool
    duration_ms: int | None = None


@dataclass(frozen=True)
class Exchange:
    """One question with its tool calls and its answer. Incomplete until the answer lands."""

    exchange_id: str
    question: str = ""
    channel: str = "v2"
    occurred_at: int = 0
    tool_calls: tuple[ToolCall, ...] = ()
    answer: str | None = None
    model: str | None = None
    idempotency_key: str | None = None
    tokens: int = 0

    @property
    def complete(self) -> bool:
        return self.answer is not None

    def to_json(self) -> str:
        return json.dumps(
            {
                "exchange_id": self.exchange_id,
                "question": self.question,
                "channel": self.channel,
                "occurred_at": self.occurred_at,
                "tool_calls": [call.__dict__ for call in self.tool_calls],
                "answer": self.answer,
                "model": self.model,
                "idempotency_key": self.idempotency_key,
                "tokens": self.tokens,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Exchange:
        raw = json.loads(text)
        raw["tool_calls"] = tuple(ToolCall(**call) for call in raw["tool_calls"])
        return cls(**raw)

    def view(self) -> dict[str, Any]:
        """What a reader of the context sees: tool arguments and results as JSON values."""
        return {
            "exchange_id": self.exchange_id,
            "question": self.question,
            "tool_calls": [
                {
                    "name": call.name,
                    "arguments": json.loads(call.arguments),
                    "result": json.loads(call.result),
                    "ok": call.ok,
                    "duration_ms": call.duration_ms,
                }
                for call in self.tool_calls
            ],
            "answer": self.answer,
            "channel": self.channel,
            "occurred_at": self.occurred_at,
            "complete": self.complete,
        }


@dataclass(frozen=True)
class SessionHead:
    """What a session holds besides its exchanges."""

    last_question_at: int = 0
    tokens: int = 0
    summary: str = ""


@dataclass(frozen=True)
class Session:
    head: SessionHead = field(default_factory=SessionHead)
    exchanges: tuple[Exchange, ...] = ()


@dataclass(frozen=True)
class SessionChange:
    """The effect of one event on one session, for a store to write atomically."""

    exchange: Exchange
    is_new: bool
    reset: bool  # the session had expired by this event's time: start it afresh
    token_delta: int
    last_question_at: int
    expires_at: int  # epoch ms; at or before now means: do not write, the session is gone


def render_tool_call(call: ToolCall) -> str:
    return f"tool {call.name}({call.arguments}) -> {'ok' if call.ok else 'failed'}: {call.result}"


def apply_event(
    head: SessionHead | None,
    exchange: Exchange | None,
    event: ThreadEvent,
    *,
    ttl_ms: int,
    count_tokens: TokenCounter,
) -> SessionChange | None:
    """Fold one thread event into the exchange it belongs to.

    Returns None when the event changes nothing (a question already recorded).
    Tokens are counted once, on the text each event adds; the session is never re-counted.
    """
    env = event.envelope
    reset = head is not None and head.last_question_at > 0 and head.last_question_at + ttl_ms <= env.occurred_at
    if reset:
        head, exchange = None, None
    last_question_at = head.last_question_at if head else 0
    is_new = exchange is None
    current = exchange or Exchange(exchange_id=event.exchange_id, occurred_at=env.occurred_at)
    if isinstance(event, QuestionAsked):
        if not is_new and current.question:
            return None  # a redelivered or retried question: the exchange already holds it
        added = event.question
        updated = replace(
            current,
            question=event.question,
            channel=event.channel,
            occurred_at=env.occurred_at,
            idempotency_key=env.idempotency_key,
        )
        last_question_at = max(last_question_at, env.occurred_at)
    elif isinstance(event, ToolCalled):
        call = ToolCall(event.call_index, event.name, event.arguments, event.result, event.ok, event.duration_ms)
        others = tuple(c for c in current.tool_calls if c.call_index != call.call_index)
        replaced = len(others) != len(current.tool_calls)
        added = "" if replaced else render_tool_call(call)
        updated = replace(current, tool_calls=tuple(sorted((*others, call), key=lambda c: c.call_index)))
    else:
        assert isinstance(event, AnswerGiven)
        added = "" if current.answer is not None else event.answer
        updated = replace(current, answer=event.answer, model=event.model)
    if last_question_at == 0:
        last_question_at = env.occurred_at  # tool call or answer without a question: time it by itself
    delta = count_tokens(added) if added else 0
    updated = replace(updated, tokens=updated.tokens + delta)
    return SessionChange(
        exchange=updated,
        is_new=is_new,
        reset=reset,
        token_delta=delta,
        last_question_at=last_question_at,
        expires_at=last_question_at + ttl_ms,
    )


def fold_session(events: list[ThreadEvent], *, ttl_ms: int, now_ms: int, count_tokens: TokenCounter) -> Session:
    """Fold a whole event sequence in memory: the reference the stores must agree with."""
    head = SessionHead()
    exchanges: dict[str, Exchange] = {}
    for event in events:
        change = apply_event(head, exchanges.get(event.exchange_id), event, ttl_ms=ttl_ms, count_tokens=count_tokens)
        if change is None or change.expires_at <= now_ms:
            continue
        if change.reset:
            head, exchanges = SessionHead(), {}
        exchanges[change.exchange.exchange_id] = change.exchange
        head = replace(head, tokens=head.tokens + change.token_delta, last_question_at=change.last_question_at)
    return Session(head, tuple(exchanges.values()))


Loaded = Mapping[tuple[SessionKey, str], tuple[SessionHead | None, Exchange | None]]


@dataclass(frozen=True)
class SessionWrite:
    """One planned store write. Without a change it only records the position as applied."""

    position: Position
    key: SessionKey | None = None
    change: SessionChange | None = None


def session_key(event: ThreadEvent) -> SessionKey | None:
    """The subject's session an event belongs to; None for public and automation threads."""
    env = event.envelope
    if env.thread != SESSION_THREAD or env.subject is None:
        return None
    return SessionKey(env.tenant, env.subject)


def plan_batch(
    events: Sequence[tuple[ThreadEvent, Position]],
    loaded: Loaded,
    *,
    ttl_ms: int,
    now_ms: int,
    count_tokens: TokenCounter,
) -> list[SessionWrite]:
    """The writes for a run of events, given the state loaded before it.

    Later events of the same session see the effect of earlier ones, exactly as the store will
    hold it, so a whole batch is loaded in one round trip and written in another.
    """
    heads: dict[SessionKey, SessionHead | None] = {}
    exchanges: dict[tuple[SessionKey, str], Exchange | None] = {}
    for (loaded_key, exchange_id), (loaded_head, loaded_exchange) in loaded.items():
        heads.setdefault(loaded_key, loaded_head)
        exchanges[(loaded_key, exchange_id)] = loaded_exchange
    writes: list[SessionWrite] = []
    for event, position in events:
        key = session_key(event)
        if key is None:
            writes.append(SessionWrite(position))
            continue
        head = heads.get(key)
        change = apply_event(
            head, exchanges.get((key, event.exchange_id)), event, ttl_ms=ttl_ms, count_tokens=count_tokens
        )
        if change is None:
            writes.append(SessionWrite(position))
            continue
        writes.append(SessionWrite(position, key, change))
        if change.expires_at <= now_ms:
            continue  # the store will not write it
        if change.reset:
            head = None
            for cached in [k for k in exchanges if k[0] == key]:
                exchanges[cached] = None
        heads[key] = SessionHead(
            last_question_at=change.last_question_at,
            tokens=(head.tokens if head else 0) + change.token_delta,
            summary=head.summary if head else "",
        )
        exchanges[(key, event.exchange_id)] = change.exchange
    return writes
