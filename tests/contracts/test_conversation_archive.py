"""The ConversationArchive contract: each thread operation's effect on active and archived entries,
run against the in-memory reference and the MongoDB-protocol server."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from adapters.in_memory import InMemoryConversationArchive
from adapters.mongo_archives import MongoConversationArchive
from adapters.mongo_entries import GROUPS
from adapters.mongo_store import mongo_client
from config.settings import Settings
from projections.archives import NEVER, ConversationRef, plan_archive
from projections.calendar import FIRST_MS, LAST_MS, calendar_window, day_bounds
from projections.ports import ConversationArchive
from projections.position import Position
from projections.relevance import query_of
from schemas.events import (
    AnswerGiven,
    Envelope,
    QuestionAsked,
    ThreadArchived,
    ThreadEvent,
    ThreadFolded,
    ThreadForked,
    ThreadPurged,
    ThreadRenamed,
    ThreadReset,
)

T0 = 1_795_000_000_000
MAIN = ConversationRef("castle", "session", "ann", "main")
HOUR = 3_600_000
BERLIN_24_2330 = 1_792_877_400_000  # 2026-10-24T21:30Z, 23:30 in Berlin, the day before clocks go back


def _env(at: int = T0) -> Envelope:
    return Envelope(tenant="castle", subject="ann", thread="session", producer="test", occurred_at=at)


class Log:
    """Events at consecutive offsets of one partition, as the broker would hand them over."""

    def __init__(self) -> None:
        self.offset = 0
        self.events: list[tuple[ThreadEvent, Position]] = []

    def add(self, *events: ThreadEvent) -> list[tuple[ThreadEvent, Position]]:
        batch = []
        for event in events:
            batch.append((event, Position("threads", 0, self.offset)))
            self.offset += 1
        self.events.extend(batch)
        return batch

    def exchange(
        self, n: int, question: str, answer: str, conversation: str | None = None, at: int = T0
    ) -> list[tuple[ThreadEvent, Position]]:
        return self.add(
            QuestionAsked(_env(at + n), f"x{n}", question, conversation=conversation, original=f'{{"q":"{question}"}}'),
            AnswerGiven(_env(at + n), f"x{n}", answer, conversation=conversation),
        )


async def _apply(archive: ConversationArchive, batch: list[tuple[ThreadEvent, Position]]) -> None:
    await archive.apply(plan_archive(batch, fork_entries=3))


class ConversationArchiveContract:
    async def test_entries_keep_the_original_and_redelivery_adds_nothing(self, archive: ConversationArchive) -> None:
        log = Log()
        original = '{"question":"nul \\u0000 and lone \\ud800","x":[1,2]}'
        batch = log.add(QuestionAsked(_env(), "x0", "nul \x00 and lone \ufffd", original=original))
        await _apply(archive, batch)
        await _apply(archive, batch)
        found = await archive.entries(MAIN, scope="current", snapshot=10)
        assert [(e.entry_id, e.original) for e in found] == [("x0.q", original)]
        meta = await archive.meta(MAIN)
        assert meta is not None and meta.running and meta.last_seq == 0

    async def test_compact_archives_the_whole_previous_generation_first(self, archive: ConversationArchive) -> None:
        log = Log()
        await _apply(archive, log.exchange(0, "first", "a0") + log.exchange(1, "second", "a1"))
        fold = log.add(ThreadFolded(_env(), "f1", "summary of the first", ("x0",), "extractive"))
        await _apply(archive, fold)
        await _apply(archive, fold)  # applied twice: the same
        found = {e.entry_id: e for e in await archive.entries(MAIN, scope="current", snapshot=100)}
        assert set(found) == {"x0.q", "x0.a", "x1.q", "x1.a", "fold.f1"}
        assert all(found[i].archives == ("compact@4",) for i in ("x0.q", "x0.a", "x1.q", "x1.a"))
        assert [i for i, e in found.items() if e.provenance() == "compacted"] == ["x0.q", "x0.a"]
        assert found["fold.f1"].enters_prompt is False and found["fold.f1"].provenance() == "active"
        meta = await archive.meta(MAIN)
        assert meta is not None and meta.generations == ("compact@4",)

    async def test_reset_clears_the_active_transcript_into_a_reset_archive(self, archive: ConversationArchive) -> None:
        log = Log()
        await _apply(archive, log.exchange(0, "before", "a0"))
        await _apply(archive, log.add(ThreadReset(_env())))
        await _apply(archive, log.exchange(1, "after", "a1"))
        current = await archive.entries(MAIN, scope="current", snapshot=100)
        assert [e.entry_id for e in current] == ["x1.q", "x1.a"]
        kept = await archive.entries(MAIN, scope="reset", snapshot=100)
        assert [(e.entry_id, e.archives, e.reset_at) for e in kept] == [
            ("x0.q", ("reset@2",), 2),
            ("x0.a", ("reset@2",), 2),
        ]
        # a snapshot taken before the reset still sees them as current
        assert [e.entry_id for e in await archive.entries(MAIN, scope="current", snapshot=1)] == ["x0.q", "x0.a"]

    async def test_pages_of_one_scope_skip_the_other_scopes_entries(self, archive: ConversationArchive) -> None:
        log = Log()
        await _apply(archive, log.exchange(0, "q0", "a0") + log.exchange(1, "q1", "a1") + log.exchange(2, "q2", "a2"))
        await _apply(archive, log.add(ThreadReset(_env())))
        await _apply(archive, log.exchange(3, "q3", "a3") + log.exchange(4, "q4", "a4"))
        first = await archive.entries(MAIN, scope="current", snapshot=100, limit=1)
        assert [e.entry_id for e in first] == ["x3.q"]
        rest = await archive.entries(MAIN, scope="current", snapshot=100, after_seq=first[0].seq, limit=2)
        assert [e.entry_id for e in rest] == ["x3.a", "x4.q"]
        kept = await archive.entries(MAIN, scope="reset", snapshot=100, limit=4)
        assert [e.entry_id for e in kept] == ["x0.q", "x0.a", "x1.q", "x1.a"]
        assert len(await archive.entries(MAIN, scope="history", snapshot=100, limit=7)) == 7
        await _apply(archive, log.add(ThreadForked(_env(), "main", "side", 200)))  # the 3 newest active ones
        side = await archive.entries(ConversationRef("castle", "session", "ann", "side"), scope="current", snapshot=99)
        assert [e.entry_id for e in side] == ["x3.a", "x4.q", "x4.a"]

    async def test_rename_moves_identity_and_keeps_payloads_and_archives(self, archive: ConversationArchive) -> None:
        log = Log()
        await _apply(archive, log.exchange(0, "q", "a") + log.add(ThreadReset(_env())) + log.exchange(1, "q1", "a1"))
        rename = log.add(ThreadRenamed(_env(), "main", "quest"))
        await _apply(archive, rename)
        await _apply(archive, rename)
        quest = ConversationRef("castle", "session", "ann", "quest")
        assert await archive.entries(MAIN, scope="history", snapshot=100) == []
        moved = await archive.entries(quest, scope="history", snapshot=100)
        assert [(e.entry_id, e.provenance()) for e in moved] == [
            ("x0.q", "reset"),
            ("x0.a", "reset"),
            ("x1.q", "active"),
            ("x1.a", "active"),
        ]
        assert moved[0].original == '{"q":"q"}'
        assert await archive.meta(MAIN) is None
        meta = await archive.meta(quest)
        assert meta is not None and meta.generations == ("reset@2",)

    async def test_fork_copies_the_newest_active_entries_and_refuses_an_existing_target(
        self, archive: ConversationArchive
    ) -> None:
        log = Log()
        await _apply(archive, log.exchange(0, "q0", "a0") + log.exchange(1, "q1", "a1") + log.exchange(2, "q2", "a2"))
        await _apply(archive, log.exchange(3, "other", "o", conversation="taken"))
        await _apply(archive, log.add(ThreadForked(_env(), "main", "side", 200)))  # the setting caps it at 3
        await _apply(archive, log.add(ThreadForked(_env(), "main", "taken", 200)))
        side = await archive.entries(ConversationRef("castle", "session", "ann", "side"), scope="current", snapshot=99)
        assert [(e.entry_id, e.forked_from) for e in side] == [("x1.a", "main"), ("x2.q", "main"), ("x2.a", "main")]
        taken = await archive.entries(
            ConversationRef("castle", "session", "ann", "taken"), scope="current", snapshot=99
        )
        assert [e.entry_id for e in taken] == ["x3.q", "x3.a"]
        assert len(await archive.entries(MAIN, scope="current", snapshot=99)) == 6  # the source is unchanged
        copies = await archive.occurrences("castle", "session", "ann", "x2.q")
        assert sorted((e.ref.conversation, e.forked_from) for e in copies) == [("main", None), ("side", "main")]
        assert await archive.occurrences("castle", "session", "ann", "x9.q") == []
        assert await archive.occurrences("castle", "session", "bob", "x2.q") == []

    async def test_archive_changes_metadata_only(self, archive: ConversationArchive) -> None:
        log = Log()
        await _apply(archive, log.exchange(0, "q", "a", conversation="job"))
        job = ConversationRef("castle", "session", "ann", "job")
        before = await archive.entries(job, scope="history", snapshot=99)
        await _apply(archive, log.add(ThreadArchived(_env(), "job", archived=True, protected=True, kind="subagent")))
        meta = await archive.meta(job)
        assert meta is not None and (meta.archived, meta.protected, meta.kind) == (True, True, "subagent")
        assert await archive.entries(job, scope="history", snapshot=99) == before

    async def test_purge_deletes_the_conversation_and_its_archives(self, archive: ConversationArchive) -> None:
        log = Log()
        await _apply(archive, log.exchange(0, "q", "a") + log.add(ThreadReset(_env())) + log.exchange(1, "b", "c"))
        await _apply(archive, log.exchange(2, "keep", "me", conversation="other"))
        await _apply(archive, log.add(ThreadPurged(_env(), "main", "asked")))
        assert await archive.entries(MAIN, scope="history", snapshot=99) == []
        assert await archive.meta(MAIN) is None
        assert len(await archive.entries(replace_conv("other"), scope="history", snapshot=99)) == 2

    async def test_retention_purge_rechecks_the_newest_entry(self, archive: ConversationArchive) -> None:
        log = Log()
        await _apply(archive, log.exchange(0, "q", "a", conversation="job"))
        await _apply(archive, log.add(ThreadArchived(_env(), "job", archived=True)))
        await _apply(archive, log.add(ThreadPurged(_env(), "job", "retention", expect_last_seq=0)))
        assert len(await archive.entries(replace_conv("job"), scope="history", snapshot=99)) == 2
        await _apply(archive, log.add(ThreadPurged(_env(), "job", "retention", expect_last_seq=1)))
        assert await archive.entries(replace_conv("job"), scope="history", snapshot=99) == []

    async def test_a_retention_purge_spares_main_and_an_unfinished_task_and_takes_a_finished_one(
        self, archive: ConversationArchive
    ) -> None:
        """Seed 004: a task conversation is purged by retention only once finished (archived), never main."""
        log = Log()
        await _apply(archive, log.exchange(0, "q", "a") + log.exchange(1, "q", "a", conversation="job"))
        await _apply(archive, log.add(ThreadPurged(_env(), "main", "retention")))
        await _apply(archive, log.add(ThreadPurged(_env(), "job", "retention")))
        assert len(await archive.entries(MAIN, scope="history", snapshot=99)) == 2
        assert len(await archive.entries(replace_conv("job"), scope="history", snapshot=99)) == 2
        await _apply(archive, log.add(ThreadArchived(_env(), "job", archived=True)))
        await _apply(archive, log.add(ThreadPurged(_env(), "job", "retention")))
        assert await archive.entries(replace_conv("job"), scope="history", snapshot=99) == []
        assert await archive.meta(replace_conv("job")) is None

    async def test_candidates_narrow_by_term_and_scope(self, archive: ConversationArchive) -> None:
        log = Log()
        await _apply(archive, log.exchange(0, "diamond chest", "twelve") + log.add(ThreadReset(_env())))
        await _apply(archive, log.exchange(1, "diamond pickaxe", "one"))
        current = await archive.candidates(
            "castle", "session", "ann", ["diamond"], conversation=None, scope="current", snapshot=99
        )
        history = await archive.candidates(
            "castle", "session", "ann", ["diamond"], conversation=None, scope="history", snapshot=99
        )
        assert [e.entry_id for e in current] == ["x1.q", "x1.a"]  # whole exchanges
        assert sorted(e.entry_id for e in history) == ["x0.a", "x0.q", "x1.a", "x1.q"]

    async def test_candidates_of_at_most_limit_exchanges(self, archive: ConversationArchive) -> None:
        log = Log()
        for n in range(4):
            await _apply(archive, log.exchange(n, f"diamond number {n}", "ok"))
        found = await archive.candidates(
            "castle", "session", "ann", ["diamond"], conversation=None, scope="current", snapshot=99, limit=2
        )
        assert len({e.exchange_id for e in found}) == 2 and len(found) == 4  # whole exchanges, two of them

    async def test_a_late_sorting_word_of_a_5000_token_entry_is_a_candidate(self, archive: ConversationArchive) -> None:
        log = Log()
        words = [f"w{n:05d}" for n in range(4_999)] + ["zymurgy"]  # 5,000 distinct; the last sorts last
        await _apply(archive, log.exchange(0, "a long tool result", " ".join(words)))
        for word in ("zymurgy", "w04998", "w00000"):
            found = await archive.candidates(
                "castle", "session", "ann", query_of(word).lookup, conversation=None, scope="current", snapshot=99
            )
            assert [e.entry_id for e in found] == ["x0.q", "x0.a"], word

    async def test_entries_are_counted_by_local_day_across_a_dst_change(self, archive: ConversationArchive) -> None:
        log = Log()
        berlin = zoneinfo.ZoneInfo("Europe/Berlin")
        times = [BERLIN_24_2330, BERLIN_24_2330 + HOUR, BERLIN_24_2330 + 25 * HOUR, BERLIN_24_2330 + 26 * HOUR]
        batch = [item for n, at in enumerate(times) for item in log.exchange(n, f"q{n}", f"a{n}", at=at - n)]
        await _apply(archive, batch + log.exchange(9, "other", "one", conversation="side", at=times[1]))
        await _apply(archive, log.add(ThreadReset(_env(times[3]), None, "side")))  # side's entries: reset archives
        window = calendar_window(times[-1], FIRST_MS, LAST_MS, berlin, max_days=3)
        assert window.days == (dt.date(2026, 10, 24), dt.date(2026, 10, 25), dt.date(2026, 10, 26))
        where = ("castle", "session", "ann")
        count = archive.count_between
        assert await count(*where, window.bounds, conversation=None, scope="current", snapshot=99) == [2, 4, 2]
        assert await count(*where, window.bounds, conversation=None, scope="history", snapshot=99) == [2, 6, 2]
        assert await count(*where, window.bounds, conversation="side", scope="current", snapshot=99) == [0, 0, 0]
        assert await count(*where, window.bounds, conversation="main", scope="current", snapshot=2) == [2, 1, 0]
        newest = archive.newest_time
        assert await newest(*where, conversation=None, scope="current", snapshot=99, since=0, until=2**62) == times[3]
        before = await newest(*where, conversation=None, scope="current", snapshot=99, since=0, until=times[2])
        assert before == times[1]
        assert await newest(*where, conversation=None, scope="current", snapshot=99, since=0, until=times[0]) is None
        start, end = day_bounds(dt.date(2026, 10, 25), berlin)
        day = await archive.entries(MAIN, scope="current", snapshot=99, since=start, until=end)
        assert [e.entry_id for e in day] == ["x1.q", "x1.a", "x2.q", "x2.a"]
        paged = await archive.entries(MAIN, scope="current", snapshot=99, since=start, until=end, after_seq=3, limit=1)
        assert [e.entry_id for e in paged] == ["x2.q"]

    async def test_erase_subject_removes_entries_and_conversations(self, archive: ConversationArchive) -> None:
        log = Log()
        await _apply(archive, log.exchange(0, "q", "a"))
        assert len(await archive.export_subject("castle", "ann")) == 2
        assert await archive.erase_subject("castle", "ann") == 3
        assert await archive.export_subject("castle", "ann") == []

    async def test_neighbours_are_the_same_with_or_without_what_the_caller_holds(
        self, archive: ConversationArchive
    ) -> None:
        """Entries either side of each seq, within the conversation, up to the radius and the snapshot;
        a search's candidates passed as `known` (any subset, any conversation) change nothing."""
        log = Log()
        for n in range(12):
            await _apply(archive, log.exchange(n, f"main {n}", f"reply {n}"))
            await _apply(archive, log.exchange(100 + n, f"side {n}", "r", conversation="side"))
        every = await archive.entries(MAIN, scope="history", snapshot=1_000)
        side = await archive.entries(replace_conv("side"), scope="history", snapshot=1_000)
        seqs = [every[1].seq, every[9].seq, every[16].seq]
        snapshot = every[20].seq
        for radius in (1, 2, 3):
            plain = await archive.neighbours(MAIN, seqs, radius, snapshot)
            hits_only = [every[1], every[9], every[16]]
            for known in ([], every[::3], every[::2] + side, every, side, [every[0], every[23]], hits_only):
                assert await archive.neighbours(MAIN, seqs, radius, snapshot, known) == plain
            assert [e.seq for e in plain[every[1].seq]] == [e.seq for e in [*every[:1], *every[2 : 2 + radius]]]
            assert [e.seq for e in plain[every[16].seq]] == [
                e.seq for e in [*every[16 - radius : 16], *every[17 : 17 + radius]]
            ]
            assert all(e.original is None and e.ref == MAIN for near in plain.values() for e in near)
        edge = await archive.neighbours(MAIN, [every[20].seq], 2, snapshot, every)
        assert [e.seq for e in edge[every[20].seq]] == [every[18].seq, every[19].seq]  # nothing past the snapshot
        last = await archive.neighbours(MAIN, [every[-1].seq], 1, 1_000, every)
        assert [e.seq for e in last[every[-1].seq]] == [every[-2].seq]
        # a renamed conversation's entries and a fork's copies have the same neighbours with or without a hint
        await _apply(archive, log.add(ThreadRenamed(_env(), "side", "moved")))
        await _apply(archive, log.exchange(200, "moved on", "yes", conversation="moved"))
        await _apply(archive, log.add(ThreadForked(_env(), "main", "copy", 3)))
        await _apply(archive, log.exchange(300, "copied on", "yes", conversation="copy"))
        for name in ("moved", "copy"):
            ref = replace_conv(name)
            held = await archive.entries(ref, scope="history", snapshot=10_000)
            chosen = [held[0].seq, held[len(held) // 2].seq, held[-1].seq]
            for radius in (1, 2):
                plain = await archive.neighbours(ref, chosen, radius, 10_000)
                assert await archive.neighbours(ref, chosen, radius, 10_000, held) == plain
                assert await archive.neighbours(ref, chosen, radius, 10_000, held + every) == plain
                middle = len(held) // 2
                assert plain[chosen[1]] == [
                    replace(e, original=None)
                    for e in [*held[middle - radius : middle], *held[middle + 1 : middle + 1 + radius]]
                ]


def replace_conv(conversation: str) -> ConversationRef:
    return ConversationRef("castle", "session", "ann", conversation)


def test_never_compares_after_every_offset() -> None:
    assert NEVER > 2**53


class TestInMemoryConversationArchive(ConversationArchiveContract):
    @pytest.fixture
    def archive(self) -> ConversationArchive:
        return InMemoryConversationArchive()


class TestMongoConversationArchive(ConversationArchiveContract):
    @pytest.fixture
    async def archive(self, settings: Settings) -> AsyncIterator[ConversationArchive]:
        client = mongo_client(settings.mongo)
        store = MongoConversationArchive(client[settings.mongo_db_name])
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()


async def test_the_legacy_raw_copy_is_dropped_and_erased(settings: Settings) -> None:
    """The `archive` collection of raw events memlog kept before issue 17 goes at prepare, and an
    erasure deletes what an older worker still wrote there during an upgrade."""
    client = mongo_client(settings.mongo)
    database = client[settings.mongo_db_name]
    try:
        await database["archive"].insert_one({"_id": "threads:0:0", "tenant": "castle", "subject": "ann"})
        store = MongoConversationArchive(database)
        await store.prepare()
        assert "archive" not in await database.list_collection_names()
        await database["archive"].insert_many(
            [{"_id": "threads:0:1", "tenant": "castle", "subject": "ann"}, {"_id": "threads:0:2", "tenant": "castle"}]
        )
        assert await store.erase_subject("castle", "ann") == 1
        assert await database["archive"].count_documents({}) == 1
    finally:
        await client.drop_database(settings.mongo_db_name)
        await client.close()


async def test_a_hole_in_the_places_never_shows_the_wrong_neighbour(settings: Settings) -> None:
    """An entry gone from the middle of a conversation (one asker of a shared thread erased): its
    neighbours are the entries either side of the hole, as the range read finds them."""
    client = mongo_client(settings.mongo)
    store = MongoConversationArchive(client[settings.mongo_db_name])
    try:
        await store.prepare()
        log = Log()
        for n in range(6):
            await _apply(store, log.exchange(n, f"q {n}", f"a {n}"))
        every = await store.entries(MAIN, scope="history", snapshot=1_000)
        assert [e.n for e in every] == list(range(12))
        gone = every[5]  # taken out of its group, as an erasure of its asker's group would
        await client[settings.mongo_db_name][GROUPS].update_many(
            {}, {"$unset": {f"m.s{gone.seq}": ""}, "$pull": {"ids": gone.entry_id, "n": gone.n}}
        )
        rest = [e for e in every if e.seq != every[5].seq]
        near = await store.neighbours(MAIN, [every[4].seq, every[6].seq], 1, 1_000, rest)
        assert [e.seq for e in near[every[4].seq]] == [every[3].seq, every[6].seq]
        assert [e.seq for e in near[every[6].seq]] == [every[4].seq, every[7].seq]
        batch = log.exchange(9, "q 9", "a 9")
        await _apply(store, batch)
        await _apply(store, batch)  # redelivered: no new place
        await _apply(store, log.exchange(10, "q 10", "a 10"))
        later = await store.entries(MAIN, scope="history", snapshot=1_000)
        assert [e.n for e in later][-5:] == [11, 12, 13, 14, 15]
    finally:
        await client.drop_database(settings.mongo_db_name)
        await client.close()


async def test_entries_archived_before_places_stay_neighbours_of_later_ones(settings: Settings) -> None:
    """A conversation archived by a memlog without places (no `n` on its entries nor its document): later
    entries get no place either, so their neighbours still include the older ones (read by range)."""
    client = mongo_client(settings.mongo)
    database = client[settings.mongo_db_name]
    store = MongoConversationArchive(database)
    try:
        await store.prepare()
        log = Log()
        for n in range(3):
            await _apply(store, log.exchange(n, f"q {n}", f"a {n}"))
        async for group in database[GROUPS].find({}, {"m": 1}):
            unset = {f"m.{key}.n": "" for key in group["m"]}
            await database[GROUPS].update_one({"_id": group["_id"]}, {"$unset": unset, "$set": {"n": []}})
        await database["conversations"].update_many({}, {"$unset": {"n": ""}})
        await _apply(store, log.exchange(3, "q 3", "a 3"))
        await _apply(store, log.add(ThreadRenamed(_env(), "main", "older")))
        every = await store.entries(MAIN, scope="history", snapshot=1_000)
        older = await store.entries(replace_conv("older"), scope="history", snapshot=1_000)
        assert every == [] and [e.n for e in older] == [None] * 8
        first_new = older[6]
        near = await store.neighbours(replace_conv("older"), [first_new.seq], 1, 1_000, older)
        assert [e.seq for e in near[first_new.seq]] == [older[5].seq, older[7].seq]
        await _apply(store, log.exchange(4, "q 4", "a 4", conversation="older"))
        assert [e.n for e in await store.entries(replace_conv("older"), scope="history", snapshot=1_000)] == [None] * 10
    finally:
        await client.drop_database(settings.mongo_db_name)
        await client.close()
