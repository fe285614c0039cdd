"""memlog's own exceptions; driver exceptions are translated into these at the adapter edge."""

from __future__ import annotations


class MemlogError(Exception):
    """Base of every error memlog raises on purpose."""


class InvalidEvent(MemlogError):
    """An event or request fails validation; the message names the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class DecodeError(MemlogError):
    """Bytes that are not a memlog event this build can read."""


class UnknownSchema(DecodeError):
    """A fingerprint or registry id that matches no known schema."""


class StoreUnavailable(MemlogError):
    """A projection store (Redis, MongoDB) cannot be reached or cannot take writes for now: an outage, retried."""


class StoreRefused(MemlogError):
    """A store refused a write because of what it holds (a wrong type, a script error, text it cannot
    encode, a document too large): the record is poison, so it goes to the dead-letter topic instead of
    being retried for ever."""


class LogUnavailable(MemlogError):
    """The Kafka cluster cannot be reached or refused the write."""


class NotCaughtUp(MemlogError):
    """A read asked for a position the projection has not applied within the wait."""


class Conflict(MemlogError):
    """A write that contradicts what the log already holds (e.g. an idempotency key in flight)."""


class ServiceSetupError(MemlogError):
    """The local stack cannot start a service; the message says what to do."""


class Unauthorized(MemlogError):
    """No credential, or one memlog does not know."""


class Forbidden(MemlogError):
    """A known credential that may not do this: another tenant's data, or an operator action."""


class SubjectErasing(MemlogError):
    """The subject is being erased right now; writes about them wait until it is done."""

    def __init__(self, tenant: str, subject: str) -> None:
        super().__init__(f"subject {subject!r} of tenant {tenant!r} is being erased; retry in a moment")
        self.tenant = tenant
        self.subject = subject


class Shredded(MemlogError):
    """An event sealed with a data key that no longer exists: its subject was erased."""


class PeriodShredded(Shredded):
    """An event sealed with a period's key that no longer exists: shredded on schedule once the period's
    records were needed no more (projections.periods), or with the rest of an erased subject's keys."""

    def __init__(self, message: str, period: str) -> None:
        super().__init__(message)
        self.period = period


class TargetExists(MemlogError):
    """A rename or fork names a conversation that exists already, or that another accepted one takes."""


class KeyReused(MemlogError):
    """An idempotency key already used for another body: a retry must send what the first attempt sent."""


class NothingToDo(MemlogError):
    """An operation that would change nothing (a compact with nothing old enough to fold)."""


class NotFound(MemlogError):
    """What was asked for is not held (never recorded, purged, or not applied yet)."""
