"""The archive projection: every thread event kept as it was logged (but a public tool call, which only
its asker may see), and the conversation archive (active and archived generations, thread
operations) derived from the same events, written in bulk."""

from __future__ import annotations

from collections.abc import Sequence

from projections.archives import FORK_ENTRIES, archived_form, plan_archive
from projections.ports import ArchivedEvent, ArchiveStore, Checkpoints, ConversationArchive
from projections.position import Position
from schemas.events import ThreadEvent, to_record
from streams.projector import advance_past


class ArchiveStep:
    def __init__(
        self,
        store: ArchiveStore,
        checkpoints: Checkpoints,
        conversations: ConversationArchive | None = None,
        *,
        fork_entries: int = FORK_ENTRIES,
    ) -> None:
        self._store = store
        self._checkpoints = checkpoints
        self._conversations = conversations
        self._fork_entries = fork_entries

    async def __call__(self, events: Sequence[tuple[ThreadEvent, Position]]) -> None:
        kept = [(event, position) for logged, position in events if (event := archived_form(logged)) is not None]
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
                for event, position in kept
            ]
        )
        if self._conversations is not None:
            await self._conversations.apply(plan_archive(events, fork_entries=self._fork_entries))
        await advance_past(self._checkpoints, events)
