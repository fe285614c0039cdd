"""The archive projection: every thread event kept in MongoDB as it was logged."""

from __future__ import annotations

from projections.position import Position
from projections.stores import ArchivedEvent, ArchiveStore, Checkpoints
from schemas.events import ThreadEvent, to_record


class ArchiveStep:
    def __init__(self, store: ArchiveStore, checkpoints: Checkpoints) -> None:
        self._store = store
        self._checkpoints = checkpoints

    async def __call__(self, event: ThreadEvent, position: Position) -> None:
        env = event.envelope
        await self._store.append(
            [
                ArchivedEvent(
                    position=position,
                    tenant=env.tenant,
                    subject=env.subject,
                    thread=env.thread,
                    exchange_id=event.exchange_id,
                    event_type=event.TYPE,
                    occurred_at=env.occurred_at,
                    record=to_record(event),
                )
            ]
        )
        await self._checkpoints.advance(position)
