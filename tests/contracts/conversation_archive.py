"""The ConversationArchive contract: each thread operation's effect on active and archived entries,
run against the in-memory reference and the MongoDB-protocol server.

The contract suite; the test module test_conversation_archive.py runs it against each adapter."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import replace

from projections.archives import ConversationRef, plan_archive
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


def envelope(at: int = T0) -> Envelope:
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
            QuestionAsked(
                envelope(at + n), f"x{n}", question, conversation=conversation, original=f'{{"q":"{question}"}}'
            ),
            AnswerGiven(envelope(at + n), f"x{n}", answer, conversation=conversation),
        )


async def apply_plan(archive: ConversationArchive, batch: list[tuple[ThreadEvent, Position]]) -> None:
    await archive.apply(plan_archive(batch, fork_entries=3))


class ConversationArchiveContract:
    async def test_entries_keep_the_original_and_redelivery_adds_nothing(self, archive: ConversationArchive) -> None:
        log = Log()
        original = '{"question":"nul \\u0000 and lone \\ud800","x":[1,2]}'
        batch = log.add(QuestionAsked(envelope(), "x0", "nul \x00 and lone \ufffd", original=original))
        await apply_plan(archive, batch)
        await apply_plan(archive, batch)
        found = await archive.entries(MAIN, scope="current", snapshot=10)
        assert [(e.entry_id, e.original) for e in found] == [("x0.q", original)]
        meta = await archive.meta(MAIN)
        assert meta is not None and meta.running and meta.last_seq == 0

    async def test_compact_archives_the_whole_previous_generation_first(self, archive: ConversationArchive) -> None:
        log = Log()
        await apply_plan(archive, log.exchange(0, "first", "a0") + log.exchange(1, "second", "a1"))
        fold = log.add(ThreadFolded(envelope(), "f1", "summary of the first", ("x0",), "extractive"))
        await apply_plan(archive, fold)
        await apply_plan(archive, fold)  # applied twice: the same
        found = {e.entry_id: e for e in await archive.entries(MAIN, scope="current", snapshot=100)}
        assert set(found) == {"x0.q", "x0.a", "x1.q", "x1.a", "fold.f1"}
        assert all(found[i].archives == ("compact@4",) for i in ("x0.q", "x0.a", "x1.q", "x1.a"))
        assert [i for i, e in found.items() if e.provenance() == "compacted"] == ["x0.q", "x0.a"]
        assert found["fold.f1"].enters_prompt is False and found["fold.f1"].provenance() == "active"
        meta = await archive.meta(MAIN)
        assert meta is not None and meta.generations == ("compact@4",)

    async def test_reset_clears_the_active_transcript_into_a_reset_archive(self, archive: ConversationArchive) -> None:
        log = Log()
        await apply_plan(archive, log.exchange(0, "before", "a0"))
        await apply_plan(archive, log.add(ThreadReset(envelope())))
        await apply_plan(archive, log.exchange(1, "after", "a1"))
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
        await apply_plan(
            archive, log.exchange(0, "q0", "a0") + log.exchange(1, "q1", "a1") + log.exchange(2, "q2", "a2")
        )
        await apply_plan(archive, log.add(ThreadReset(envelope())))
        await apply_plan(archive, log.exchange(3, "q3", "a3") + log.exchange(4, "q4", "a4"))
        first = await archive.entries(MAIN, scope="current", snapshot=100, limit=1)
        assert [e.entry_id for e in first] == ["x3.q"]
        rest = await archive.entries(MAIN, scope="current", snapshot=100, after_seq=first[0].seq, limit=2)
        assert [e.entry_id for e in rest] == ["x3.a", "x4.q"]
        kept = await archive.entries(MAIN, scope="reset", snapshot=100, limit=4)
        assert [e.entry_id for e in kept] == ["x0.q", "x0.a", "x1.q", "x1.a"]
        assert len(await archive.entries(MAIN, scope="history", snapshot=100, limit=7)) == 7
        await apply_plan(archive, log.add(ThreadForked(envelope(), "main", "side", 200)))  # the 3 newest active ones
        side = await archive.entries(ConversationRef("castle", "session", "ann", "side"), scope="current", snapshot=99)
        assert [e.entry_id for e in side] == ["x3.a", "x4.q", "x4.a"]

    async def test_rename_moves_identity_and_keeps_payloads_and_archives(self, archive: ConversationArchive) -> None:
        log = Log()
        await apply_plan(
            archive, log.exchange(0, "q", "a") + log.add(ThreadReset(envelope())) + log.exchange(1, "q1", "a1")
        )
        rename = log.add(ThreadRenamed(envelope(), "main", "quest"))
        await apply_plan(archive, rename)
        await apply_plan(archive, rename)
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
        await apply_plan(
            archive, log.exchange(0, "q0", "a0") + log.exchange(1, "q1", "a1") + log.exchange(2, "q2", "a2")
        )
        await apply_plan(archive, log.exchange(3, "other", "o", conversation="taken"))
        await apply_plan(archive, log.add(ThreadForked(envelope(), "main", "side", 200)))  # the setting caps it at 3
        await apply_plan(archive, log.add(ThreadForked(envelope(), "main", "taken", 200)))
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
        await apply_plan(archive, log.exchange(0, "q", "a", conversation="job"))
        job = ConversationRef("castle", "session", "ann", "job")
        before = await archive.entries(job, scope="history", snapshot=99)
        await apply_plan(
            archive, log.add(ThreadArchived(envelope(), "job", archived=True, protected=True, kind="subagent"))
        )
        meta = await archive.meta(job)
        assert meta is not None and (meta.archived, meta.protected, meta.kind) == (True, True, "subagent")
        assert await archive.entries(job, scope="history", snapshot=99) == before

    async def test_purge_deletes_the_conversation_and_its_archives(self, archive: ConversationArchive) -> None:
        log = Log()
        await apply_plan(
            archive, log.exchange(0, "q", "a") + log.add(ThreadReset(envelope())) + log.exchange(1, "b", "c")
        )
        await apply_plan(archive, log.exchange(2, "keep", "me", conversation="other"))
        await apply_plan(archive, log.add(ThreadPurged(envelope(), "main", "asked")))
        assert await archive.entries(MAIN, scope="history", snapshot=99) == []
        assert await archive.meta(MAIN) is None
        assert len(await archive.entries(replace_conv("other"), scope="history", snapshot=99)) == 2

    async def test_retention_purge_rechecks_the_newest_entry(self, archive: ConversationArchive) -> None:
        log = Log()
        await apply_plan(archive, log.exchange(0, "q", "a", conversation="job"))
        await apply_plan(archive, log.add(ThreadArchived(envelope(), "job", archived=True)))
        await apply_plan(archive, log.add(ThreadPurged(envelope(), "job", "retention", expect_last_seq=0)))
        assert len(await archive.entries(replace_conv("job"), scope="history", snapshot=99)) == 2
        await apply_plan(archive, log.add(ThreadPurged(envelope(), "job", "retention", expect_last_seq=1)))
        assert await archive.entries(replace_conv("job"), scope="history", snapshot=99) == []

    async def test_a_retention_purge_spares_main_and_an_unfinished_task_and_takes_a_finished_one(
        self, archive: ConversationArchive
    ) -> None:
        """Seed 004: a task conversation is purged by retention only once finished (archived), never main."""
        log = Log()
        await apply_plan(archive, log.exchange(0, "q", "a") + log.exchange(1, "q", "a", conversation="job"))
        await apply_plan(archive, log.add(ThreadPurged(envelope(), "main", "retention")))
        await apply_plan(archive, log.add(ThreadPurged(envelope(), "job", "retention")))
        assert len(await archive.entries(MAIN, scope="history", snapshot=99)) == 2
        assert len(await archive.entries(replace_conv("job"), scope="history", snapshot=99)) == 2
        await apply_plan(archive, log.add(ThreadArchived(envelope(), "job", archived=True)))
        await apply_plan(archive, log.add(ThreadPurged(envelope(), "job", "retention")))
        assert await archive.entries(replace_conv("job"), scope="history", snapshot=99) == []
        assert await archive.meta(replace_conv("job")) is None

    async def test_candidates_narrow_by_term_and_scope(self, archive: ConversationArchive) -> None:
        log = Log()
        await apply_plan(archive, log.exchange(0, "diamond chest", "twelve") + log.add(ThreadReset(envelope())))
        await apply_plan(archive, log.exchange(1, "diamond pickaxe", "one"))
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
            await apply_plan(archive, log.exchange(n, f"diamond number {n}", "ok"))
        found = await archive.candidates(
            "castle", "session", "ann", ["diamond"], conversation=None, scope="current", snapshot=99, limit=2
        )
        assert len({e.exchange_id for e in found}) == 2 and len(found) == 4  # whole exchanges, two of them

    async def test_a_common_term_of_the_thread_is_cut_to_the_exchanges_where_it_weighs_most(
        self, archive: ConversationArchive
    ) -> None:
        """Issue 41: a thread's common word reads the exchanges where it weighs most, not the thread whole."""
        log = Log()
        for n in range(6):  # "lantern" in every exchange, more often in later ones; "zephyr" in one
            answer = " ".join(["lantern"] * (n + 1) + ["ledger"] * (12 - n) + (["zephyr"] if n == 1 else []))
            await apply_plan(archive, log.exchange(n, f"day {n}", answer))
        await apply_plan(archive, log.exchange(6, "lantern", "lantern lantern", conversation="side"))
        lookup, where = query_of("lantern zephyr").lookup, ("castle", "session", "ann")

        async def read(per_term: int, conversation: str = "main", snapshot: int = 99) -> tuple[set[str], bool]:
            within = (conversation, snapshot)
            found, cut = await archive.bounded_candidates(*where, lookup, within=within, per_term=per_term, limit=99)
            assert len(found) == 2 * len({e.exchange_id for e in found})  # whole exchanges
            return {str(e.exchange_id) for e in found}, cut

        assert await read(2) == ({"x1", "x4", "x5"}, True)  # lantern's two best, and zephyr's one
        assert await read(2, snapshot=7) == ({"x1", "x2", "x3"}, True)  # nothing after the snapshot counts
        assert await read(2, conversation="side") == ({"x6"}, False)
        whole = await archive.candidates(*where, lookup, conversation="main", scope="current", snapshot=99)
        assert await read(6) == ({str(e.exchange_id) for e in whole}, False)

    async def test_a_late_sorting_word_of_a_5000_token_entry_is_a_candidate(self, archive: ConversationArchive) -> None:
        log = Log()
        words = [f"w{n:05d}" for n in range(4_999)] + ["zymurgy"]  # 5,000 distinct; the last sorts last
        await apply_plan(archive, log.exchange(0, "a long tool result", " ".join(words)))
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
        await apply_plan(archive, batch + log.exchange(9, "other", "one", conversation="side", at=times[1]))
        await apply_plan(
            archive, log.add(ThreadReset(envelope(times[3]), None, "side"))
        )  # side's entries: reset archives
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
        await apply_plan(archive, log.exchange(0, "q", "a"))
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
            await apply_plan(archive, log.exchange(n, f"main {n}", f"reply {n}"))
            await apply_plan(archive, log.exchange(100 + n, f"side {n}", "r", conversation="side"))
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
        await apply_plan(archive, log.add(ThreadRenamed(envelope(), "side", "moved")))
        await apply_plan(archive, log.exchange(200, "moved on", "yes", conversation="moved"))
        await apply_plan(archive, log.add(ThreadForked(envelope(), "main", "copy", 3)))
        await apply_plan(archive, log.exchange(300, "copied on", "yes", conversation="copy"))
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
