"""Main's compacted and reset generations past their age limit (issue 36): a generations purge deletes
the entries that a fold or a reset took out of the transcript, up to its offset, and nothing of the
current transcript; run against the in-memory reference and the MongoDB-protocol server."""

from __future__ import annotations

import pytest

from memlog.adapters.in_memory import InMemoryConversationArchive
from projections.generations import GenerationAge
from projections.ports import ConversationArchive
from schemas.events import ThreadFolded, ThreadPurged, ThreadReset
from tests.contracts.conversation_archive import MAIN, T0, Log, apply_plan, envelope, replace_conv


async def _ids(archive: ConversationArchive, scope: str = "history") -> list[str]:
    return [e.entry_id for e in await archive.entries(MAIN, scope=scope, snapshot=999)]  # type: ignore[arg-type]


async def _two_generations(archive: ConversationArchive, log: Log) -> None:
    """x0 compacted at 4 (a fold), x1 and the fold's summary reset at 6, x2 the current transcript."""
    await apply_plan(archive, log.exchange(0, "first", "a0") + log.exchange(1, "second", "a1", at=T0 + 100))
    await apply_plan(archive, log.add(ThreadFolded(envelope(), "f1", "summary of the first", ("x0",), "extractive")))
    await apply_plan(archive, log.add(ThreadReset(envelope(T0 + 200))))
    await apply_plan(archive, log.exchange(2, "third", "a2", at=T0 + 300))


class ArchiveGenerationsContract:
    async def test_the_generations_are_told_by_the_fold_or_reset_that_took_them_out(
        self, archive: ConversationArchive
    ) -> None:
        log = Log()
        await _two_generations(archive, log)
        assert await archive.generation_ages(MAIN) == [
            GenerationAge(taken_at=4, newest=T0, entries=2),
            GenerationAge(taken_at=5, newest=T0 + 101, entries=3),
        ]
        assert await archive.generation_ages(replace_conv("none")) == []

    async def test_a_generations_purge_takes_the_old_generations_and_never_the_transcript(
        self, archive: ConversationArchive
    ) -> None:
        log = Log()
        await _two_generations(archive, log)
        purge = log.add(ThreadPurged(envelope(), "main", "retention", generations_until=4))
        await apply_plan(archive, purge)
        await apply_plan(archive, purge)  # applied twice: the same
        assert await _ids(archive) == ["x1.q", "x1.a", "fold.f1", "x2.q", "x2.a"]
        meta = await archive.meta(MAIN)  # compact@4 holds x1 still
        assert meta is not None and meta.generations == ("compact@4", "reset@5") and meta.last_seq == 7
        await apply_plan(archive, log.add(ThreadPurged(envelope(), "main", "retention", generations_until=5)))
        assert await _ids(archive) == ["x2.q", "x2.a"]
        assert await _ids(archive, "current") == ["x2.q", "x2.a"]
        meta = await archive.meta(MAIN)
        assert meta is not None and meta.generations == ()
        assert await archive.generation_ages(MAIN) == []

    async def test_a_generations_purge_spares_the_active_entries_of_a_compacted_generation_and_a_running_exchange(
        self, archive: ConversationArchive
    ) -> None:
        log = Log()
        await apply_plan(archive, log.exchange(0, "first", "a0") + log.exchange(1, "second", "a1"))
        await apply_plan(archive, log.add(ThreadFolded(envelope(), "f1", "summary", ("x0",), "extractive")))
        await apply_plan(archive, log.exchange(2, "running", "later")[:1])  # a question waiting for its answer
        await apply_plan(archive, log.add(ThreadPurged(envelope(), "main", "retention", generations_until=99)))
        assert await _ids(archive) == ["x1.q", "x1.a", "fold.f1", "x2.q"]
        meta = await archive.meta(MAIN)
        assert meta is not None and meta.running and meta.generations == ("compact@4",)  # x1 is still in it

    async def test_a_generations_purge_of_another_conversation_leaves_main(self, archive: ConversationArchive) -> None:
        log = Log()
        await _two_generations(archive, log)
        await apply_plan(archive, log.exchange(3, "q", "a", conversation="job"))
        await apply_plan(archive, log.add(ThreadPurged(envelope(), "job", "retention", generations_until=99)))
        assert len(await _ids(archive)) == 7
        assert len(await archive.entries(replace_conv("job"), scope="history", snapshot=999)) == 2


class TestInMemoryArchiveGenerations(ArchiveGenerationsContract):
    @pytest.fixture
    def archive(self) -> ConversationArchive:
        return InMemoryConversationArchive()


class TestMongoArchiveGenerations(ArchiveGenerationsContract):
    @pytest.fixture
    def archive(self, mongo_archive: ConversationArchive) -> ConversationArchive:
        return mongo_archive
