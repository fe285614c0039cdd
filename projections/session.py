"""Threads: pure rules that fold thread events into exchanges (seed 000, "The session", "Other threads").

A thread is the subject's session, the tenant's public thread, or an agent's automation thread.
No I/O here. The agent loads what the rules need, calls them, and hands the result to a store.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from projections.folded import Folded, SummaryNotice, fold_more, summary_notice
from projections.position import Position
from schemas.events import (
    AUTOMATION_THREAD,
    MAIN_CONVERSATION,
    PUBLIC_THREAD,
    SESSION_THREAD,
    AnswerGiven,
    ExchangeEvent,
    QuestionAsked,
    ThreadArchived,
    ThreadEvent,
    ThreadFolded,
    ThreadForked,
    ThreadPurged,
    ThreadRenamed,
    ThreadReset,
    ToolCalled,
    compact_json,
    conversation_of,
)
from schemas.frozen import quick
from schemas.session_text import added_text, tokens_of

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class ThreadPolicy:
    """The numbers of seed 000; every one is a setting whose default is the document's."""

    session_ttl_ms: int = 86_400_000  # CHAT_TTL_SECONDS: 24 h after the last question
    public_ttl_ms: int = 7_200_000  # public thread: 2 h after its last question
    automation_ttl_ms: int = 7_200_000  # automation thread: 2 h after the agent's last wake
    fold_tokens: int = 32_000  # "past about 32 000 tokens ..."
    fold_exchanges: int = 100  # "... or 100 exchanges"
    keep_tokens: int = 12_000  # "everything but the newest 12 000 tokens"
    keep_min: int = 2  # "at least 2 exchanges"
    keep_max: int = 30  # "at most 30"
    summary_chars: int = 3_000  # "a summary of up to 3000 characters"
    urgent_tokens: int = 42_000  # "only a session past 42 000 tokens folds before the answer"

    def ttl_ms(self, thread: str) -> int:
        if thread == PUBLIC_THREAD:
            return self.public_ttl_ms
        if thread == AUTOMATION_THREAD:
            return self.automation_ttl_ms
        return self.session_ttl_ms


class ThreadKey(NamedTuple):
    """One thread: (tenant, session, subject), (tenant, public, ""), or (tenant, automation, agent).

    A tuple, so hashing it (every event of a batch looks its thread up) costs no Python call.
    """

    tenant: str
    thread: str
    owner: str

    @classmethod
    def session(cls, tenant: str, subject: str) -> ThreadKey:
        return cls(tenant, SESSION_THREAD, subject)

    @classmethod
    def public(cls, tenant: str) -> ThreadKey:
        return cls(tenant, PUBLIC_THREAD, "")

    @classmethod
    def automation(cls, tenant: str, agent: str) -> ThreadKey:
        return cls(tenant, AUTOMATION_THREAD, agent)


@dataclass(frozen=True)
class ToolCall:
    call_index: int
    name: str
    arguments: str  # JSON text, as received
    result: str  # JSON text, as received
    ok: bool
    duration_ms: int | None = None
    called_at: int | None = None  # occurred_at of the call's first event (None: stored before it was kept)


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
    subject: str | None = None  # who asked, on the public and automation threads (erasure finds their lines)

    @property
    def complete(self) -> bool:
        return self.answer is not None

    def to_json(self) -> str:
        extra = {} if self.subject is None else {"subject": self.subject}
        return compact_json(
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
                **extra,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Exchange:
        raw = json.loads(text)
        raw["tool_calls"] = tuple(ToolCall(**call) for call in raw["tool_calls"])
        return cls(**raw)

    def render(self) -> str:
        """The exchange as the model reads it. Parts only ever append, so renderings grow at the end."""
        if self.channel == "askx":
            # seed 000: "/askx requests land in the session as one line: what was asked and which commands came out"
            return f"askx: {self.question} -> " + (f"{self.answer}\n" if self.answer is not None else "")
        text = f"Q: {self.question}\n"
        for call in self.tool_calls:
            status = "ok" if call.ok else "failed"
            text += f"tool {call.name}({call.arguments}) {status}: {call.result}\n"
        if self.answer is not None:
            text += f"A: {self.answer}\n"
        return text

    def view(self) -> dict[str, Any]:
        """What a reader of the context sees: tool arguments and results as JSON values."""
        return {
            "exchange_id": self.exchange_id,
            "question": self.question,
            "tool_calls": [
                {
                    "call_index": call.call_index,
                    "name": call.name,
                    "arguments": json.loads(call.arguments),
                    "result": json.loads(call.result),
                    "ok": call.ok,
                    "duration_ms": call.duration_ms,
                    "called_at": call.called_at,
                }
                for call in self.tool_calls
            ],
            "answer": self.answer,
            "channel": self.channel,
            "occurred_at": self.occurred_at,
            "complete": self.complete,
            "line": self.render().rstrip("\n") if self.channel == "askx" else None,
        }


@dataclass(frozen=True)
class Segment:
    """One asker's part of a shared thread's summary: the summary of their own lines alone.

    In the log it is a ThreadFolded about them, sealed under their key, so erasing them removes it
    from the stores and no replay can bring it back (DESIGN "Shared-thread summaries").
    """

    asker: str | None  # who asked the lines it sums up; None: lines about no subject (tenant key)
    text: str  # empty in a change: the asker's part is dropped
    tokens: int
    at: int  # occurred_at of the fold that set it: parts render oldest first
    folded: Folded | None = None  # what this asker's part folded away (None: set before notices existed)

    def order(self) -> tuple[int, str]:
        return (self.at, self.asker or "")


@dataclass(frozen=True)
class SessionHead:
    """What a thread holds besides its exchanges."""

    last_question_at: int = 0
    tokens: int = 0  # exchanges' tokens plus the summary's (and its segments')
    summary: str = ""  # the session's summary; on a shared thread, only one folded before segments existed
    summary_tokens: int = 0
    count: int = 0  # exchanges held
    segments: tuple[Segment, ...] = ()  # a shared thread's summary, per asker, oldest first
    folded: Folded | None = None  # what `summary` folded away (None: no fold, or one before notices existed)
    applied: int = field(default=-1, compare=False)  # offset of the store's last write (-1: none); not a value

    @property
    def summary_text(self) -> str:
        """The summary as the model reads it: a shared thread's segments one after another."""
        if not self.segments:
            return self.summary
        return "\n".join([self.summary] * bool(self.summary) + [segment.text for segment in self.segments])

    def notice(self, key: ThreadKey) -> SummaryNotice | None:
        """The summary's loss notice, one over all its parts; None with no fold recorded."""
        held = self.summary or self.folded is not None
        parts = [self.folded] * bool(held) + [segment.folded for segment in self.segments]
        return summary_notice(key.tenant, key.thread, key.owner, parts)


@dataclass(frozen=True)
class Session:
    head: SessionHead = field(default_factory=SessionHead)
    exchanges: tuple[Exchange, ...] = ()

    def render(self, key: ThreadKey | None = None) -> str:
        """The context as one text. Between folds it only grows at the end (prompt caches keep it).

        Given the thread's key, the summary starts with its loss notice (what was folded away, and the
        thread's search route for the exact words): once, and only a fold changes it.
        """
        summary = self.head.summary_text
        notice = self.head.notice(key) if key is not None else None
        lines = ([] if notice is None else [notice.render()]) + [summary] * bool(summary)
        text = "Summary of the earlier conversation:\n" + "\n".join(lines) + "\n\n" if lines else ""
        return text + "".join(exchange.render() for exchange in self.exchanges)


@dataclass(frozen=True)
class SessionChange:
    """The effect of one event on one thread, for a store to write atomically."""

    exchange: Exchange | None  # upserted; appended to the order when new
    reset: bool  # the thread starts afresh: it expired by this event's time, or was reset
    token_delta: int
    last_question_at: int
    expires_at: int  # epoch ms; at or before now means: do not write, the thread is gone
    remove: tuple[str, ...] = ()  # exchanges folded away
    summary: str | None = None  # the new summary, when it changes
    summary_tokens: int = 0
    count_delta: int = 0
    segment: Segment | None = None  # a shared thread's asker's part of the summary, set (or dropped: empty text)
    folded: Folded | None = None  # with a new summary: what it has folded away so far


_EXCHANGE_EVENTS = frozenset({QuestionAsked, ToolCalled, AnswerGiven})


def _expired(head: SessionHead | None, ttl_ms: int, at: int) -> bool:
    return head is not None and head.last_question_at > 0 and head.last_question_at + ttl_ms <= at


def apply_event(
    head: SessionHead | None,
    exchange: Exchange | None,
    event: ThreadEvent,
    *,
    ttl_ms: int,
    count_tokens: TokenCounter,
    covered: Mapping[str, Exchange | None] | None = None,
) -> SessionChange | None:
    """Fold one exchange event, fold or reset into its thread.

    Returns None when the event changes nothing: a question already recorded, a tool result on the
    public thread (only the asker may see it), a fold whose exchanges are gone already.
    Tokens are counted once, on the text each event adds; the thread is never re-counted. An exchange
    event carries the count of its text (schemas.session_text) when its producer had a tokenizer:
    `count_tokens` is called only for events without one.
    `covered` holds the exchanges a ThreadFolded names, as loaded.
    """
    if conversation_of(event) != MAIN_CONVERSATION:
        return None  # the session shows the thread's current conversation only; the others live in the archive
    if type(event) not in _EXCHANGE_EVENTS:  # most events are one: no other kind's check applies to them
        return _apply_other(head, exchange, event, ttl_ms, count_tokens, covered)
    return _apply_exchange_event(head, exchange, cast(ExchangeEvent, event), ttl_ms, count_tokens)


def _apply_other(
    head: SessionHead | None,
    exchange: Exchange | None,
    event: ThreadEvent,
    ttl_ms: int,
    count_tokens: TokenCounter,
    covered: Mapping[str, Exchange | None] | None,
) -> SessionChange | None:
    env = event.envelope
    if isinstance(event, ThreadRenamed) or (isinstance(event, ThreadPurged) and event.generations_until is None):
        last = head.last_question_at if head else env.occurred_at  # moved away or purged: afresh, like a reset
        return SessionChange(None, True, 0, last, max(last, env.occurred_at) + ttl_ms, summary="")
    if isinstance(event, ThreadForked | ThreadArchived | ThreadPurged):
        return None  # fork, archive metadata and a purge of main's older generations leave the transcript as it is
    if isinstance(event, ThreadReset):
        last = head.last_question_at if head else env.occurred_at
        return SessionChange(None, True, 0, last, max(last, env.occurred_at) + ttl_ms, summary="")
    if isinstance(event, ThreadFolded):
        return _apply_fold(head, event, ttl_ms, count_tokens, covered or {})
    assert isinstance(event, QuestionAsked | ToolCalled | AnswerGiven)  # a subclass of one
    return _apply_exchange_event(head, exchange, event, ttl_ms, count_tokens)


def _apply_exchange_event(
    head: SessionHead | None,
    exchange: Exchange | None,
    event: ExchangeEvent,
    ttl_ms: int,
    count_tokens: TokenCounter,
) -> SessionChange | None:
    env = event.envelope
    reset = _expired(head, ttl_ms, env.occurred_at)
    if reset:
        head, exchange = None, None
    last_question_at = head.last_question_at if head else 0
    is_new = exchange is None
    current = exchange or Exchange(exchange_id=event.exchange_id, occurred_at=env.occurred_at)
    if isinstance(event, QuestionAsked):
        if not is_new and current.question:
            return None  # a redelivered or retried question: the exchange already holds it
        question = added_text(event)  # on the public thread prefixed with the asker's name (seed 000)
        added = question
        fields: dict[str, Any] = {
            "question": question,
            "channel": event.channel,
            "occurred_at": env.occurred_at,
            "idempotency_key": env.idempotency_key,
            "subject": None if env.thread == SESSION_THREAD else env.subject,
        }
        last_question_at = max(last_question_at, env.occurred_at)
    elif isinstance(event, ToolCalled):
        if env.thread == PUBLIC_THREAD:
            return None  # seed 000: the public thread "keeps the answers but not the tool results"
        earlier = [c.called_at for c in current.tool_calls if c.call_index == event.call_index]
        # a result sent after its call replaces the call, and keeps the time it was made
        called_at = earlier[0] if earlier and earlier[0] is not None else env.occurred_at
        call = ToolCall(
            event.call_index, event.name, event.arguments, event.result, event.ok, event.duration_ms, called_at
        )
        others = tuple(c for c in current.tool_calls if c.call_index != call.call_index)
        replaced = len(others) != len(current.tool_calls)
        added = "" if replaced else added_text(event)
        fields = {"tool_calls": tuple(sorted((*others, call), key=lambda c: c.call_index))}
    else:
        assert isinstance(event, AnswerGiven)
        added = "" if current.answer is not None else added_text(event)
        fields = {"answer": event.answer, "model": event.model}
    if last_question_at == 0:
        last_question_at = env.occurred_at  # tool call or answer without a question: time it by itself
    # `added` is the event's own text or nothing: its carried count, counted at production, applies to it
    delta = tokens_of(event, count_tokens) if added else 0
    updated = Exchange(**{**current.__dict__, "tokens": current.tokens + delta, **fields})  # cheaper than replace()
    return SessionChange(
        exchange=updated,
        reset=reset,
        token_delta=delta,
        last_question_at=last_question_at,
        expires_at=last_question_at + ttl_ms,
        count_delta=1 if is_new else 0,
    )


def _apply_fold(
    head: SessionHead | None,
    event: ThreadFolded,
    ttl_ms: int,
    count_tokens: TokenCounter,
    covered: Mapping[str, Exchange | None],
) -> SessionChange | None:
    if head is None or _expired(head, ttl_ms, event.envelope.occurred_at):
        return None
    folded = [covered.get(exchange_id) for exchange_id in event.covers]
    present = [exchange for exchange in folded if exchange is not None]
    if len(present) != len(folded):
        return None  # applied already, or the thread was reset since: a fold is all or nothing
    if event.segment:
        return _apply_segment(head, event, present, ttl_ms, count_tokens)
    summary_tokens = count_tokens(event.summary) if event.summary else 0
    return SessionChange(
        exchange=None,
        reset=False,
        token_delta=summary_tokens - head.summary_tokens - sum(exchange.tokens for exchange in present),
        last_question_at=head.last_question_at,
        expires_at=head.last_question_at + ttl_ms,
        remove=tuple(event.covers),
        summary=event.summary,
        summary_tokens=summary_tokens,
        count_delta=-len(present),
        folded=fold_more(head.folded, bool(head.summary), event.summarizer, _spans(present)),
    )


def _spans(exchanges: Sequence[Exchange]) -> list[tuple[int, int]]:
    return [(exchange.occurred_at, exchange.tokens) for exchange in exchanges]


def _apply_segment(
    head: SessionHead, event: ThreadFolded, present: list[Exchange], ttl_ms: int, count_tokens: TokenCounter
) -> SessionChange | None:
    """One asker's part of a shared thread's fold: their lines out, their segment in (or out)."""
    asker = event.envelope.subject
    if any(exchange.subject != asker for exchange in present):
        # another's lines in this asker's part would be sealed under the wrong key and outlive
        # their own erasure: such a segment is refused whole
        return None
    held = next((segment for segment in head.segments if segment.asker == asker), None)
    if not present and held is None:
        return None  # shortens or drops a part the thread no longer holds (reset or erased since)
    tokens = count_tokens(event.summary) if event.summary else 0
    folded = fold_more(held.folded if held else None, held is not None, event.summarizer, _spans(present))
    return SessionChange(
        exchange=None,
        reset=False,
        token_delta=tokens - (held.tokens if held else 0) - sum(exchange.tokens for exchange in present),
        last_question_at=head.last_question_at,
        expires_at=head.last_question_at + ttl_ms,
        remove=tuple(event.covers),
        count_delta=-len(present),
        segment=Segment(asker, event.summary, tokens, event.envelope.occurred_at, folded),
    )


def with_segment(segments: tuple[Segment, ...], segment: Segment) -> tuple[Segment, ...]:
    """The parts once `segment` is set (an empty one drops its asker's part), oldest first."""
    kept = [held for held in segments if held.asker != segment.asker] + [segment] * bool(segment.text)
    return tuple(sorted(kept, key=Segment.order))


def after(head: SessionHead | None, change: SessionChange, applied: int = -1) -> SessionHead:
    """The head a store holds once it has written the change (at offset `applied`)."""
    base = SessionHead() if change.reset or head is None else head
    return SessionHead(
        last_question_at=change.last_question_at,
        tokens=base.tokens + change.token_delta,
        summary=base.summary if change.summary is None else change.summary,
        summary_tokens=base.summary_tokens if change.summary is None else change.summary_tokens,
        count=base.count + change.count_delta,
        segments=base.segments if change.segment is None else with_segment(base.segments, change.segment),
        folded=base.folded if change.summary is None else change.folded,
        applied=applied,
    )


def event_exchange_ids(event: ThreadEvent) -> tuple[str, ...]:
    """The exchanges a rule needs loaded to apply the event."""
    if isinstance(event, ThreadFolded):
        return event.covers
    if isinstance(event, ThreadReset | ThreadRenamed | ThreadForked | ThreadArchived | ThreadPurged):
        return ()
    return (event.exchange_id,)


def thread_key(event: ThreadEvent) -> ThreadKey:
    env = event.envelope
    return ThreadKey(env.tenant, env.thread, env.owner)


def fold_session(
    events: Sequence[ThreadEvent], *, policy: ThreadPolicy, now_ms: int, count_tokens: TokenCounter
) -> dict[ThreadKey, Session]:
    """Fold a whole event sequence in memory, every thread at once: the reference the stores must agree with."""
    heads: dict[ThreadKey, SessionHead] = {}
    threads: dict[ThreadKey, dict[str, Exchange]] = {}
    for event in events:
        key = thread_key(event)
        held = threads.setdefault(key, {})
        ids = event_exchange_ids(event)
        change = apply_event(
            heads.get(key),
            held.get(ids[0]) if ids and not isinstance(event, ThreadFolded) else None,
            event,
            ttl_ms=policy.ttl_ms(key.thread),
            count_tokens=count_tokens,
            covered={exchange_id: held.get(exchange_id) for exchange_id in ids},
        )
        if change is None or change.expires_at <= now_ms:
            continue
        if change.reset:
            held.clear()
        for exchange_id in change.remove:
            held.pop(exchange_id, None)
        if change.exchange is not None:
            held[change.exchange.exchange_id] = change.exchange
        heads[key] = after(None if change.reset else heads.get(key), change)
    return {key: Session(heads[key], tuple(threads[key].values())) for key in heads if heads[key].last_question_at}


Loaded = Mapping[tuple[ThreadKey, str], tuple[SessionHead | None, Exchange | None]]


@dataclass(frozen=True)
class SessionWrite:
    """One planned store write. Without a change it only records the position as applied."""

    position: Position
    key: ThreadKey | None = None
    change: SessionChange | None = None


@dataclass(frozen=True)
class BatchPlan:
    writes: list[SessionWrite]
    heads: dict[ThreadKey, SessionHead | None]  # as they stand after the batch
    answered: set[ThreadKey]  # threads where an answer landed: the moment a fold may follow


# built several times for every event a replay applies: without object.__setattr__ (schemas.frozen)
for _built in (ToolCall, Exchange, Segment, SessionHead, Session, SessionChange, SessionWrite, BatchPlan):
    quick(_built)


def plan_batch(
    events: Sequence[tuple[ThreadEvent, Position]],
    loaded: Loaded,
    *,
    policy: ThreadPolicy,
    now_ms: int,
    count_tokens: TokenCounter,
) -> BatchPlan:
    """The writes for a run of events, given the state loaded before it.

    Later events of a thread see the effect of earlier ones, exactly as the store will hold it,
    so a whole batch is loaded in one round trip and written in another. A redelivered event (at or
    below the offset its thread's head has applied) changes nothing, here as in the store.
    """
    heads: dict[ThreadKey, SessionHead | None] = {}
    exchanges: dict[tuple[ThreadKey, str], Exchange | None] = {}
    for (loaded_key, exchange_id), (loaded_head, loaded_exchange) in loaded.items():
        heads.setdefault(loaded_key, loaded_head)
        exchanges[(loaded_key, exchange_id)] = loaded_exchange
    writes: list[SessionWrite] = []
    answered: set[ThreadKey] = set()
    for event, position in events:
        key = thread_key(event)
        head = heads.get(key)
        ids = event_exchange_ids(event)
        change = apply_event(
            head,
            exchanges.get((key, ids[0])) if ids and not isinstance(event, ThreadFolded) else None,
            event,
            ttl_ms=policy.ttl_ms(key.thread),
            count_tokens=count_tokens,
            # only a fold reads the exchanges it covers: no mapping to build for every other event
            covered={i: exchanges.get((key, i)) for i in ids} if isinstance(event, ThreadFolded) else None,
        )
        if change is None or (head is not None and head.applied >= position.offset):
            writes.append(SessionWrite(position))  # nothing, or redelivered: planned on a newer head, it would differ
            continue
        writes.append(SessionWrite(position, key, change))
        if change.expires_at <= now_ms:
            continue  # the store will not write it
        if change.reset:
            for cached in [k for k in exchanges if k[0] == key]:
                exchanges[cached] = None
        for exchange_id in change.remove:
            exchanges[(key, exchange_id)] = None
        if change.exchange is not None:
            exchanges[(key, change.exchange.exchange_id)] = change.exchange
        heads[key] = after(head, change, position.offset)
        if isinstance(event, AnswerGiven):
            answered.add(key)
    return BatchPlan(writes, heads, answered)


def needs_fold(head: SessionHead | None, policy: ThreadPolicy) -> bool:
    """Past about 32,000 tokens or 100 exchanges (seed 000)."""
    return head is not None and (head.tokens > policy.fold_tokens or head.count > policy.fold_exchanges)


def plan_fold(session: Session, policy: ThreadPolicy) -> list[Exchange]:
    """The exchanges to fold: everything but the newest 12,000 tokens, keeping at least 2 and at most 30.

    Only complete exchanges fold; an exchange still waiting for its answer stays, with all after it.
    """
    if not needs_fold(session.head, policy):
        return []
    exchanges = session.exchanges
    kept = 0
    tail_tokens = 0
    for exchange in reversed(exchanges):
        if kept >= policy.keep_max:
            break
        if kept >= policy.keep_min and tail_tokens + exchange.tokens > policy.keep_tokens:
            break
        kept += 1
        tail_tokens += exchange.tokens
    candidates = list(exchanges[: len(exchanges) - kept])
    for index, exchange in enumerate(candidates):
        if not exchange.complete:
            return candidates[:index]
    return candidates
