"""An operator's erase or export request about a subject; the privacy step (streams.steps.privacy) carries it out."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from memlog.app.positions import Positions
from projections.cursors import Cursors
from projections.paging import ledger_cursor, ledger_key, list_binding
from projections.ports import Exports, Ledger
from projections.position import Position
from schemas.errors import NotCaughtUp
from schemas.events import SESSION_THREAD, Envelope, SubjectErased, SubjectExportRequested, check_name
from streams.producer import EventProducer
from streams.sealer import Sealer


@dataclass(frozen=True)
class Requested:
    request_id: str
    position: Position  # what the worker's privacy step must reach
    done: bool  # False: the worker has not applied it within the wait; ask the ledger later
    ledger: dict[str, Any] | None = None  # an erasure's ledger entry, once done
    bundle: AsyncIterator[bytes] | None = None  # an export's JSON bundle, part after part, once done


def ledger_view(entry: dict[str, Any]) -> dict[str, Any]:
    """A ledger entry as JSON: its id as `id`, its time in ISO 8601."""
    view = {("id" if k == "_id" else k): v for k, v in entry.items()}
    at = view.get("at")
    if isinstance(at, dt.datetime):
        view["at"] = at.isoformat()
    return view


class SubjectRequests:
    """Args:
    producer: where requests go (memlog.privacy).
    producer_name: the envelope's producer.
    ledger: every request, and what it did.
    exports: the bundles exports leave behind.
    sealer: forgets cached data keys once an erasure is applied.
    positions: waits until the worker has applied a request.
    wait_seconds: how long a request waits for the worker by default.
    cursors: seals and opens the ledger's cursors.
    """

    def __init__(
        self,
        producer: EventProducer,
        producer_name: str,
        ledger: Ledger,
        exports: Exports,
        sealer: Sealer,
        positions: Positions,
        wait_seconds: float,
        *,
        cursors: Cursors,
    ) -> None:
        self._producer = producer
        self._producer_name = producer_name
        self._ledger = ledger
        self._exports = exports
        self._sealer = sealer
        self._positions = positions
        self._wait = wait_seconds
        self._cursors = cursors

    async def erase(
        self, tenant: str, subject: str, *, requested_by: str, reason: str | None, wait: float | None = None
    ) -> Requested:
        """Everything memlog holds about the subject goes, then their data key; waits (bounded) for the worker."""
        request_id, position = await self._request("erase", tenant, subject, requested_by, reason)
        done = await self._positions.reached(position, self._wait if wait is None else wait)
        self._sealer.forget()  # this process writes no more with the erased key
        entry = await self._ledger.get(request_id) if done else None
        return Requested(request_id, position, done, ledger=None if entry is None else ledger_view(entry))

    async def export(self, tenant: str, subject: str, *, requested_by: str, wait: float | None = None) -> Requested:
        """One JSON bundle of everything memlog holds about the subject, once the worker has made it."""
        request_id, position = await self._request("export", tenant, subject, requested_by, None)
        if not await self._positions.reached(position, self._wait if wait is None else wait):
            return Requested(request_id, position, done=False)
        if await self._exports.get(request_id) is None:
            raise NotCaughtUp(f"export {request_id} was applied but its bundle is gone")
        return Requested(request_id, position, done=True, bundle=self._exports.read(request_id))

    async def bundle(self, tenant: str, request_id: str) -> AsyncIterator[bytes] | None:
        """An export's bundle (JSON, part after part, however large); None once it has expired (a day),
        or when it is another tenant's."""
        stored = await self._exports.get(request_id)
        if stored is None or stored["tenant"] != tenant:
            return None
        return self._exports.read(request_id)

    async def ledger(
        self, *, tenant: str | None, subject: str | None, limit: int, cursor: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Operator requests and what they did (erasure counts, never content), newest first, and the
        cursor of the next page (None on the last)."""
        if subject is not None:
            check_name("subject", subject)
        bound = list_binding("ledger", tenant, subject)
        before = None if cursor is None else ledger_key(self._cursors, cursor, bound)
        found = await self._ledger.entries(tenant=tenant, subject=subject, limit=limit + 1, before=before)
        page = found[:limit]
        following = ledger_cursor(self._cursors, bound, page[-1]["at"], page[-1]["_id"]) if len(found) > limit else None
        return [ledger_view(entry) for entry in page], following

    async def _request(
        self,
        kind: Literal["erase", "export"],
        tenant: str,
        subject: str,
        requested_by: str,
        reason: str | None,
    ) -> tuple[str, Position]:
        """Logged in the ledger, then put on memlog.privacy; the event is built (so validated) before either."""
        request_id = str(uuid.uuid4())
        env = Envelope(tenant=tenant, subject=subject, thread=SESSION_THREAD, producer=self._producer_name)
        event: SubjectErased | SubjectExportRequested = (
            SubjectErased(env, request_id, requested_by, reason)
            if kind == "erase"
            else SubjectExportRequested(env, request_id, requested_by)
        )
        await self._ledger.record(
            f"{kind}-requested", tenant=tenant, subject=subject, request_id=request_id, requested_by=requested_by
        )
        return request_id, await self._producer.produce([event])
