"""The envelope every memlog event carries, and the checks of the names and texts in it. Pure: no I/O.

`schemas.events` re-exports all of it; events are imported from there."""

from __future__ import annotations

import datetime as dt
import functools
import unicodedata
import uuid
from dataclasses import dataclass, field

from schemas.errors import InvalidEvent
from schemas.frozen import quick

SESSION_THREAD = "session"  # the subject's own session
PUBLIC_THREAD = "public"  # one per tenant (seed 000, "Other threads")
AUTOMATION_THREAD = "automation"  # one per agent
THREADS: tuple[str, ...] = (SESSION_THREAD, PUBLIC_THREAD, AUTOMATION_THREAD)
MAIN_CONVERSATION = "main"  # a thread's current conversation, the one its session projection shows
MAX_NAME_LENGTH = 200
KEY_SEPARATOR = "\x1f"  # a control character, which names may not contain


def now_ms() -> int:
    return int(dt.datetime.now(dt.UTC).timestamp() * 1000)


def check_name(field_name: str, value: object) -> str:
    """Tenant, subject and agent names: 1 to 200 printable characters."""
    if not isinstance(value, str) or not value:
        raise InvalidEvent(field_name, "must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidEvent(field_name, f"is {len(value)} characters; at most {MAX_NAME_LENGTH}")
    # ASCII (most names): its only Cc characters are exactly what str.isprintable refuses, 0x00-0x1F and 0x7F
    if (not value.isprintable()) if value.isascii() else _has_control(value):
        raise InvalidEvent(field_name, "contains a control character")
    return value


@functools.lru_cache(maxsize=65_536)
def _has_control(value: str) -> bool:
    # names repeat on every event (tenant, subject, agent, producer): look each one up once
    return any(unicodedata.category(ch) in ("Cc", "Cs") for ch in value)


def check_text(field_name: str, value: object, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidEvent(field_name, "must be a string")
    if not value and not allow_empty:
        raise InvalidEvent(field_name, "must not be empty")
    return value


def record_key(tenant: str, owner: str) -> bytes:
    """Kafka record key: tenant + thread owner, so one subject's events share a partition."""
    return f"{tenant}{KEY_SEPARATOR}{owner}".encode()


@quick
@dataclass(frozen=True)
class Envelope:
    tenant: str
    thread: str
    producer: str
    subject: str | None = None
    agent: str | None = None
    occurred_at: int = field(default_factory=now_ms)  # epoch milliseconds, set by the producer
    event_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    idempotency_key: str | None = None
    trace_id: str | None = None

    def __post_init__(self) -> None:
        check_name("tenant", self.tenant)
        if self.subject is not None:
            check_name("subject", self.subject)
        if self.agent is not None:
            check_name("agent", self.agent)
        if self.thread not in THREADS:
            raise InvalidEvent("thread", f"must be one of {', '.join(THREADS)}, not {self.thread!r}")
        if self.thread == SESSION_THREAD and self.subject is None:
            raise InvalidEvent("subject", "a session event needs its subject")
        if self.thread == AUTOMATION_THREAD and self.agent is None:
            raise InvalidEvent("agent", "an automation thread event needs its agent")
        if not isinstance(self.occurred_at, int) or self.occurred_at < 0:
            raise InvalidEvent("occurred_at", "must be a non-negative epoch-milliseconds integer")

    @property
    def owner(self) -> str:
        """Who the thread belongs to: the subject of a session, the agent of an automation thread, else the tenant."""
        if self.thread == SESSION_THREAD:
            return self.subject or ""
        if self.thread == AUTOMATION_THREAD:
            return self.agent or ""
        return ""
