"""Search across threads: the snapshot marks, scope, cursors (projections/search.py) and the use case
(memlog/app/search.py) on the in-memory archive."""

from __future__ import annotations

import base64

import pytest

from memlog.adapters.in_memory import InMemoryCheckpoints, InMemoryConversationArchive
from memlog.app.search import CrossSearch
from projections.archives import plan_archive
from projections.cursors import Cursors
from projections.position import Position
from projections.search import decode_cursor, encode_cursor, landed, marks_of, partition_of, visible
from schemas.errors import InvalidEvent
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent, ThreadForked, ThreadReset

CURSORS = Cursors(b"k" * 32)

T0 = 1_795_000_000_000


class Log:
    def __init__(self) -> None:
        self.offsets: dict[int, int] = {}

    def add(self, partition: int, *events: ThreadEvent) -> list[tuple[ThreadEvent, Position]]:
        batch: list[tuple[ThreadEvent, Position]] = []
        for event in events:
            offset = self.offsets.get(partition, 0)
            batch.append((event, Position("memlog.threads", partition, offset)))
            self.offsets[partition] = offset + 1
        return batch

    def exchange(
        self, partition: int, subject: str, agent: str, n: int, question: str, answer: str = "ok"
    ) -> list[tuple[ThreadEvent, Position]]:
        env = _env(subject, agent, n)
        return self.add(partition, QuestionAsked(env, f"x{n}", question), AnswerGiven(env, f"x{n}", answer))


def _env(subject: str, agent: str | None, n: int = 0) -> Envelope:
    return Envelope(
        tenant="castle", thread="session", subject=subject, agent=agent, producer="test", occurred_at=T0 + n
    )


class Archive(InMemoryConversationArchive):
    """The archive with its projection's checkpoints, advanced after each write as the archive step does."""

    def __init__(self) -> None:
        super().__init__()
        self.checkpoints = InMemoryCheckpoints()

    async def log(self, batch: list[tuple[ThreadEvent, Position]]) -> None:
        await self.apply(plan_archive(batch))
        for _, position in batch:
            await self.checkpoints.advance(position)


async def world() -> tuple[Archive, CrossSearch, Log]:
    archive = Archive()
    log = Log()
    for batch in (
        log.exchange(0, "ann", "smith", 0, "where is the red chest"),
        log.exchange(0, "ann", "baker", 1, "a red chest of bread"),
        log.exchange(0, "ann", "smith", 2, "the chest is red and heavy"),
        log.exchange(1, "bob", "smith", 3, "forge a red chest for me"),
    ):
        await archive.log(batch)
    return archive, CrossSearch(archive, archive, archive.checkpoints, cursors=CURSORS), log


async def test_an_agent_finds_its_own_entries_in_every_thread_ranked_phrase_first() -> None:
    _, search, _ = await world()
    page = await search.agent("castle", "smith", "red chest")
    assert [(r["thread"], r["entry_id"], r["match"]) for r in page["results"]] == [
        ("session:ann", "x0.q", "phrase"),  # among phrases, BM25 (the shorter exchange) before recency
        ("session:bob", "x3.q", "phrase"),
        ("session:ann", "x2.q", "tokens"),
    ]
    assert all(r["enters_prompt"] is False and r["agent"] == "smith" for r in page["results"])
    # neighbours are the agent's own entries: baker's answer just before x2.q is not shown
    assert [n["entry_id"] for n in page["results"][2]["neighbours"]] == ["x2.a"]
    everyone = await search.tenant("castle", "red chest")
    assert [r["entry_id"] for r in everyone["results"]] == ["x0.q", "x3.q", "x1.q", "x2.q"]


async def test_a_capped_read_is_marked_partial_and_no_word_reads_nothing() -> None:
    archive, _, _ = await world()
    capped = CrossSearch(archive, archive, archive.checkpoints, candidates=2, cursors=CURSORS)
    page = await capped.tenant("castle", "red chest")
    assert page["partial"] is True and len(page["results"]) == 3  # two exchanges and one past the cap, read
    whole = await CrossSearch(archive, archive, archive.checkpoints, cursors=CURSORS).tenant("castle", "red chest")
    assert whole["partial"] is False and len(whole["results"]) == 4
    assert (await capped.tenant("castle", "?!"))["results"] == []
    with pytest.raises(InvalidEvent, match="q"):
        await capped.tenant("castle", " ".join(f"t{n}" for n in range(1_000)))


async def test_pages_keep_the_first_pages_snapshot_while_the_archive_moves() -> None:
    archive, search, log = await world()
    first = await search.agent("castle", "smith", "red chest", limit=1)
    assert [r["entry_id"] for r in first["results"]] == ["x0.q"]
    # later: a newer phrase match, a reset of ann's session, a fork of bob's
    await archive.log(log.exchange(1, "bob", "smith", 9, "another red chest"))
    await archive.log(log.add(0, ThreadReset(_env("ann", "smith"))))
    await archive.log(log.add(1, ThreadForked(_env("bob", "smith"), "main", "copy", 10)))
    seen = [r["entry_id"] for r in first["results"]]
    provenances = []
    cursor = first["next_cursor"]
    while cursor:
        page = await search.agent("castle", "smith", "red chest", limit=1, cursor=cursor)
        seen += [r["entry_id"] for r in page["results"]]
        provenances += [r["provenance"] for r in page["results"]]
        cursor = page["next_cursor"]
    assert seen == ["x0.q", "x3.q", "x2.q"]  # nothing appended, forked or reset since shows up
    assert provenances == ["active", "active"]
    fresh = await search.agent("castle", "smith", "red chest", scope="current")
    assert [r["entry_id"] for r in fresh["results"]] == ["x9.q", "x9.q", "x3.q", "x3.q"]
    assert {r["conversation"] for r in fresh["results"]} == {"main", "copy"}
    history = await search.agent("castle", "smith", "red chest")
    assert {r["entry_id"]: r["provenance"] for r in history["results"] if r["thread"] == "session:ann"} == {
        "x0.q": "reset",
        "x2.q": "reset",
    }


async def test_bad_input_and_foreign_cursors_are_refused() -> None:
    _, search, _ = await world()
    first = await search.agent("castle", "smith", "red chest", limit=1)
    with pytest.raises(InvalidEvent, match="cursor"):
        await search.agent("castle", "baker", "red chest", cursor=first["next_cursor"])
    with pytest.raises(InvalidEvent, match="cursor"):
        await search.tenant("castle", "red chest", cursor=first["next_cursor"])
    for bad in ("nonsense", "e30", encode_cursor(CURSORS, "x", {"p": 1}, (0, 0, 0, "s"))[:-3] + "AAA"):
        with pytest.raises(InvalidEvent, match="cursor"):
            await search.agent("castle", "smith", "red chest", cursor=bad)
    with pytest.raises(InvalidEvent, match="q"):
        await search.agent("castle", "smith", "  ")
    with pytest.raises(InvalidEvent, match="agent"):
        await search.agent("castle", "", "red")


def test_a_cursor_round_trips_and_rejects_wrong_shapes() -> None:
    token = encode_cursor(CURSORS, "b", {"memlog.threads:0": 7}, (0, -2, -5, "memlog.threads:0:3"), 12)
    assert decode_cursor(CURSORS, token, "b") == ({"memlog.threads:0": 7}, (0, -2, -5, "memlog.threads:0:3"), 12)
    shapes: list[object] = [
        {"m": [], "p": [0, 0, 0, "s"]},
        {"m": {}, "p": [0, 0, "s"]},
        {"m": {"p": True}, "p": [0, 0, 0, "s"]},
        {"m": {}, "p": [0, 2**70, 0, "s"]},
        {"m": {}, "p": [0, 0.5, 0, "s"]},
        {"m": {}, "p": [0, 0, 0, 1]},
        {"m": {}, "p": [0, 0, 0, "s"], "n": "7"},
        {"m": {}, "p": [0, 0, 0, "s"], "n": 2**70},
        [1],
        "x",
    ]
    for shape in shapes:  # signed, yet not what a search issues: refused all the same
        with pytest.raises(InvalidEvent, match="cursor"):
            decode_cursor(CURSORS, CURSORS.seal("b", shape), "b")
    unsigned = base64.urlsafe_b64encode(b'{"m":{},"p":[0,0,0,"s"]}').decode()
    with pytest.raises(InvalidEvent, match="cursor"):
        decode_cursor(CURSORS, unsigned, "b")


async def test_marks_read_forks_and_archives_as_applied_offsets() -> None:
    archive, _, log = await world()
    await archive.log(log.add(1, ThreadForked(_env("bob", "smith"), "main", "copy", 10)))
    found = await archive.across("castle", [], agent=None)
    copy = next(e for e in found if e.ref.conversation == "copy" and e.role == "question")
    assert partition_of(copy) == "memlog.threads:1" and landed(copy) == 2 and copy.seq == 0
    marks = marks_of(e for e in found if e.ref.conversation == "main")
    assert marks == {"memlog.threads:0": 5, "memlog.threads:1": 1}
    assert not visible(copy, marks, "history")  # forked after those marks
    assert visible(copy, marks_of(found), "history")
