"""What the API answers, typed. Every model keeps fields a newer API adds (extra="allow")."""

from __future__ import annotations

from typing import Any, NewType

from pydantic import BaseModel, ConfigDict, Field

# A position token: what a write answers, and what the next read takes as `after=` to see that write.
Position = NewType("Position", str)


class Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class Accepted(Answer):
    """An exchange (or a part of one) taken; `idempotent` when this was a retry answered as the first was."""

    exchange_id: str
    position: Position
    idempotent: bool = False


class ToolCall(Answer):
    name: str
    arguments: Any = None
    result: Any = None
    ok: bool = True
    duration_ms: int | None = None
    receipt: str | None = None  # the newest receipt's result: passed, failed, failed_expected, not_run


class ReceiptAccepted(Answer):
    """A receipt taken: pass `position` as `after=` to a read that must show it."""

    receipt_id: str
    position: Position


class Exchange(Answer):
    exchange_id: str
    question: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    answer: str | None = None
    occurred_at: int
    complete: bool
    receipt: str | None = None  # the receipt of the action the answer claims
    answer_state: str | None = None  # verified, unverified, incomplete; None: no answer yet, or nothing to check


class Fact(Answer):
    fact_id: str
    scope: str
    agent: str | None = None
    text: str
    source: str
    created_at: int
    updated_at: int
    score: float | None = None
    how: str | None = None
    belongs_to: str = "subject"


class Context(Answer):
    """A thread ready to put before the model: its exchanges, summary and the facts bearing on the question."""

    tenant: str
    subject: str | None = None
    thread: str
    summary: str
    exchanges: list[Exchange]
    facts: list[Fact] = Field(default_factory=list)
    tokens: int
    rendered: str
    rendered_facts: str = ""


class FactAccepted(Answer):
    fact_id: str
    position: Position


class Facts(Answer):
    tenant: str
    subject: str | None = None
    facts: list[Fact]
    limit: int
    next_cursor: str | None = None


class PrivacyRequest(Answer):
    """An erasure or export asked for; `done` False: the worker has not applied it yet (see the ledger)."""

    request_id: str
    position: Position
    done: bool
    ledger: dict[str, Any] | None = None


class LedgerPage(Answer):
    entries: list[dict[str, Any]]
    next_cursor: str | None = None
