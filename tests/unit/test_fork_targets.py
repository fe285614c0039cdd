"""A fork or rename reserves its target's name at acceptance: of two to one name exactly one is accepted,
whatever the order in which they read the archive; a name freed after its fork was applied is free."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from memlog.adapters.in_memory import InMemoryConversationArchive, InMemoryIdempotency
from memlog.app.conversations import Conversations
from projections.archives import ConversationMeta, ConversationRef, plan_archive
from projections.cursors import Cursors
from projections.position import Position
from schemas.errors import TargetExists
from schemas.events import ThreadEvent
from streams.producer import EventProducer

MAIN = ConversationRef("castle", "session", "ann", "main")


class Log:
    """A producer that appends to one partition and lets the test say what the archive has applied."""

    def __init__(self, archive: InMemoryConversationArchive) -> None:
        self.archive = archive
        self.events: list[tuple[ThreadEvent, Position]] = []
        self.applied = -1

    async def produce(self, events: list[ThreadEvent]) -> Position:
        await asyncio.sleep(0)  # another request may run in between, as it would on the event loop
        for event in events:
            self.events.append((event, Position("threads", 0, len(self.events))))
        return self.events[-1][1]

    async def apply(self) -> None:
        """The archive projection catches up."""
        await self.archive.apply(plan_archive(self.events[self.applied + 1 :]))
        self.applied = len(self.events) - 1

    async def reached(self, position: Position) -> bool:
        return position.offset <= self.applied


class StaleFirstRead(InMemoryConversationArchive):
    """An archive read that the projection overtakes at once: the first meta() answers nothing."""

    stale = True

    async def meta(self, ref: ConversationRef) -> ConversationMeta | None:
        if self.stale:
            self.stale = False
            return None
        return await super().meta(ref)


def conversations(archive: InMemoryConversationArchive, claims: InMemoryIdempotency) -> tuple[Conversations, Log]:
    log = Log(archive)
    uses = Conversations(
        archive,
        cast(EventProducer, log),
        "test",
        claims=claims,
        archived=cast(Any, log.reached),
        cursors=Cursors(b"k" * 32),
    )
    return uses, log


async def test_of_concurrent_forks_to_one_name_exactly_one_is_accepted() -> None:
    uses, log = conversations(InMemoryConversationArchive(), InMemoryIdempotency(86_400))
    answers = await asyncio.gather(*(uses.fork(MAIN, "side") for _ in range(5)), return_exceptions=True)
    assert sum(isinstance(a, Position) for a in answers) == 1
    assert all(isinstance(a, TargetExists) for a in answers if not isinstance(a, Position))
    renamed = await asyncio.gather(uses.rename(MAIN, "side"), return_exceptions=True)
    assert isinstance(renamed[0], TargetExists)  # a rename competes for the same name
    assert len(log.events) == 1


async def test_a_name_freed_after_its_fork_was_applied_is_taken_again() -> None:
    archive = InMemoryConversationArchive()
    uses, log = conversations(archive, InMemoryIdempotency(86_400))
    await uses.fork(MAIN, "side")
    await log.apply()
    with pytest.raises(TargetExists, match="exists already"):
        await uses.fork(MAIN, "side")
    await uses.purge(ConversationRef("castle", "session", "ann", "side"))
    await log.apply()
    await uses.fork(MAIN, "side")
    assert len(log.events) == 3


async def test_a_stale_archive_read_never_lets_a_second_fork_through_a_dropped_reservation() -> None:
    # A's fork is applied; B drops A's reservation (the archive now answers for the name); C had read
    # the archive before A's fork was applied, so only a read made while C holds the name refuses it
    archive = StaleFirstRead()
    archive.stale = False
    claims = InMemoryIdempotency(86_400)
    uses, log = conversations(archive, claims)
    await uses.fork(MAIN, "side")
    await log.apply()
    archive.stale = True
    with pytest.raises(TargetExists):
        await uses.fork(MAIN, "side")  # B: drops the applied reservation, then finds the conversation
    assert await claims.reserve("castle", "session", "ann", "\x1fconversation\x1fside", "ann") is None
    await claims.release("castle", "session", "ann", "\x1fconversation\x1fside")
    archive.stale = True
    with pytest.raises(TargetExists, match="exists already"):
        await uses.fork(MAIN, "side")  # C
    assert len(log.events) == 1
    held = await claims.reserve("castle", "session", "ann", "\x1fconversation\x1fside", "ann")
    assert held is None  # C let go of the name it could not take
