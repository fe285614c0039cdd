"""What routes share: the opened services, the raw request body, the read-your-writes query parameters."""

from __future__ import annotations

import functools
from typing import Annotated, Any

from fastapi import Depends, Header, Query, Request

from memlog.app.positions import Ready
from memlog.services import Services
from schemas.errors import InvalidEvent


async def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(_services)]

# Declared on every route that takes an id of something memlog holds: an unknown one answers 404.
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such id here (never recorded, purged, expired, or not applied yet)."}
}

# Declared on every route that may refuse for what memlog holds already: an idempotency key in use or
# used for another body, a target conversation that exists, nothing to compact, a replay running.
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"description": "Refused for what is held already; `detail` says what (some say to retry shortly)."}
}

IDEMPOTENCY_KEY = Header(
    default=None,
    alias="Idempotency-Key",
    description="A retry with the same key and body is answered as the first attempt was, and writes nothing "
    "again; the same key with another body answers 409 (keys are kept MEMLOG_IDEMPOTENCY_TTL_SECONDS).",
)
AFTER = Query(default=None, description="A position token; wait until it is applied.")
WAIT = Query(
    default=None,
    ge=0,
    allow_inf_nan=False,
    description="Seconds to wait for `after`; at most MEMLOG_READ_WAIT_SECONDS.",
)


def _archive_ready(services: ServicesDep, after: str | None = AFTER, wait: float | None = WAIT) -> Ready:
    """A route's read-your-writes wait on the archive, for `after` (at most `wait` seconds). Not run here (a
    dependency runs before the request's other parameters and body are validated): the use case runs it
    once it has checked the request's names."""
    return functools.partial(services.positions.wait_all, after, wait, archive=True)


def _edit_ready(services: ServicesDep, after: str | None = AFTER) -> Ready:
    """The same for an edit of a fact, which waits at most MEMLOG_READ_WAIT_SECONDS."""
    return functools.partial(services.positions.wait_all, after)


ArchiveReady = Annotated[Ready, Depends(_archive_ready)]
EditReady = Annotated[Ready, Depends(_edit_ready)]


async def original(request: Request) -> str:
    """The request's JSON text exactly as received: escapes such as \\u0000 and \\ud800 stay as they were."""
    try:
        return (await request.body()).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEvent("body", f"is not UTF-8: {exc}") from None
