"""An operator's erase or export request; the privacy step (streams.steps.privacy) carries it out."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Literal

from projections.position import Position
from schemas.events import SESSION_THREAD, Envelope, SubjectErased, SubjectExportRequested

if TYPE_CHECKING:
    from memlog.services import Services


async def request(
    services: Services,
    kind: Literal["erase", "export"],
    tenant: str,
    subject: str,
    *,
    requested_by: str,
    producer: str,
    reason: str | None = None,
) -> tuple[str, Position]:
    """An operator's erase or export request: logged in the ledger, then put on memlog.privacy.

    The event is built (and so validated) before anything is written. Returns the request id and
    the position the worker's privacy agent must reach.
    """
    request_id = str(uuid.uuid4())
    env = Envelope(tenant=tenant, subject=subject, thread=SESSION_THREAD, producer=producer)
    event: SubjectErased | SubjectExportRequested = (
        SubjectErased(env, request_id, requested_by, reason)
        if kind == "erase"
        else SubjectExportRequested(env, request_id, requested_by)
    )
    await services.ledger.record(
        f"{kind}-requested", tenant=tenant, subject=subject, request_id=request_id, requested_by=requested_by
    )
    return request_id, await services.producer.produce([event])
