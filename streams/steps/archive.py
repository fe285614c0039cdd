"""The archive projection: the conversation archive (every exchange's entries with its original as
received, active and archived generations, thread operations) derived from the thread events,
written in bulk. No second, raw copy of the events is kept: the entries hold the originals, and the
log is the source of truth."""

from __future__ import annotations

from collections.abc import Sequence

from projections.archives import FORK_ENTRIES, plan_archive
from projections.ports import Checkpoints, ConversationArchive
from projections.position import Position
from schemas.events import ThreadEvent
from streams.projector import advance_past


class ArchiveStep:
    def __init__(
        self, checkpoints: Checkpoints, conversations: ConversationArchive, *, fork_entries: int = FORK_ENTRIES
    ) -> None:
        self._checkpoints = checkpoints
        self._conversations = conversations
        self._fork_entries = fork_entries

    async def __call__(self, events: Sequence[tuple[ThreadEvent, Position]]) -> None:
        await self._conversations.apply(plan_archive(events, fork_entries=self._fork_entries))
        await advance_past(self._checkpoints, events)
