"""Every way a call can fail, as memlog_client's own exceptions: a refusal carries the API's `loc`, `msg`
and `type` for each problem it names; a transport failure says whether the request may have been applied."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One item of a refusal's `detail`: where (`loc`, e.g. ("body", "text")), what (`msg`), and its `type`."""

    loc: tuple[str | int, ...]
    msg: str
    type: str

    @classmethod
    def of(cls, item: Any) -> Problem:
        if not isinstance(item, dict):
            return cls((), str(item), "error")
        loc = item.get("loc") or ()
        return cls(
            tuple(loc) if isinstance(loc, list | tuple) else (str(loc),),
            str(item.get("msg", "")),
            str(item.get("type", "error")),
        )


class MemlogError(Exception):
    """Anything memlog_client raises."""


class TransportError(MemlogError):
    """The API could not be reached, or the connection broke; `maybe_applied` when the request was sent
    whole before it broke (a write without an idempotency key may have been kept)."""

    def __init__(self, message: str, *, maybe_applied: bool) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied


class Refused(MemlogError):
    """The API answered with a refusal (4xx or 5xx)."""

    def __init__(self, status: int, problems: list[Problem], retry_after: float | None = None) -> None:
        self.status = status
        self.problems = problems
        self.retry_after = retry_after
        text = "; ".join(f"{'.'.join(map(str, p.loc)) or '-'}: {p.msg}" for p in problems) or "no detail"
        super().__init__(f"{status}: {text}")

    @property
    def loc(self) -> tuple[str | int, ...]:
        return self.problems[0].loc if self.problems else ()

    @property
    def msg(self) -> str:
        return self.problems[0].msg if self.problems else ""

    @property
    def type(self) -> str:
        return self.problems[0].type if self.problems else "error"


class Unauthorized(Refused):
    """401: no credential, or one the API does not know."""


class Forbidden(Refused):
    """403: the credential may not act for this tenant, or on an operator route."""


class NotFound(Refused):
    """404: no such id (never recorded, purged, expired, or not applied yet)."""


class Conflict(Refused):
    """409: refused for what is held already (an idempotency key used for another body, a target that exists)."""


class TooLarge(Refused):
    """413: the body is over the API's limit."""


class Invalid(Refused):
    """422: a field's value is refused; `loc` names it."""


class Unavailable(Refused):
    """503: the log or a store is away, or a read has not caught up with `after` (Retry-After)."""


class ServerError(Refused):
    """500: a bug in memlog; its API log has the details."""


BY_STATUS: dict[int, type[Refused]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    422: Invalid,
    500: ServerError,
    503: Unavailable,
}


def refusal(status: int, body: Any, retry_after: float | None) -> Refused:
    detail = body.get("detail") if isinstance(body, dict) else body
    items = detail if isinstance(detail, list) else [] if detail is None else [{"msg": str(detail)}]
    return BY_STATUS.get(status, Refused)(status, [Problem.of(item) for item in items], retry_after)
