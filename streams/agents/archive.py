"""The archive projection: every thread event kept in MongoDB as it was logged, written in bulk."""

from __future__ import annotations

from collections.abc import Sequence

from projections.position import Position
from projections.stores import ArchivedEvent, ArchiveStore, Checkpoints
from schemas.events import ThreadEvent, to_record
from streams.projector import advance_past


class ArchiveStep:
    def __init__(self, store: ArchiveStore, checkpoints: Checkpoints) -> None:
        self._store = store
        self._checkpoints = checkpoints

    async def __call__(self, events: Sequence[tuple[ThreadEvent, Position]]) -> None:
        await self._store.append(
            [
                ArchivedEvent(
                    position=position,
                    tenant=event.envelope.tenant,
                    subject=event.envelope.subject,
                    thread=event.envelope.thread,
                    exchange_id=getattr(event, "exchange_id", None),  # folds and resets have none
                    event_type=event.TYPE,
                    occurred_at=event.envelope.occurred_at,
                    record=to_record(event),
                )
                for event, position in events
            ]
        )
        await advance_past(self._checkpoints, events)
