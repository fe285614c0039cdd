"""The MongoDB archive's groups (memlog/adapters/mongo_entries.py) on the MongoDB-protocol server: the same
documents whatever the batches and redeliveries, entries archived one document each before issue 16
moved into groups, an exchange too large for one document split, an entry id repeated in a later
group dropped as a repeated append is."""

from __future__ import annotations

from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from memlog.adapters.mongo_archives import MongoConversationArchive
from memlog.adapters.mongo_entries import GROUPS, LEGACY_ENTRIES, conversation_id
from memlog.adapters.mongo_postings import POSTINGS
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from projections.archives import NEVER, ConversationRef, plan_archive
from projections.position import Position
from schemas.events import (
    AnswerGiven,
    Envelope,
    QuestionAsked,
    ThreadEvent,
    ThreadFolded,
    ThreadPurged,
    ThreadRenamed,
    ToolCalled,
)
from tests.contracts.conversation_archive import MAIN, Log, envelope

Batch = list[tuple[ThreadEvent, Position]]


def _log() -> Log:
    log = Log()
    for n in range(4):
        log.add(
            QuestionAsked(envelope(), f"x{n}", f"where is chest {n}", original=f'{{"q":{n}}}'),
            ToolCalled(envelope(), f"x{n}", 0, "recall", '{"q":"chest"}', f'{{"facts":["gate {n}"]}}'),
            ToolCalled(envelope(), f"x{n}", 1, "recall", '{"q":"gate"}', '{"facts":[]}'),
            AnswerGiven(envelope(), f"x{n}", f"by gate {n}"),
        )
        if n == 1:
            log.add(ThreadFolded(envelope(), "f1", "chests and gates", ("x0",), "test"))
    return log


async def _state(database: AsyncDatabase[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    store = MongoConversationArchive(database)
    groups = await database[GROUPS].find({}).sort("_id", 1).to_list()
    entries = await store.entries(MAIN, scope="history", snapshot=NEVER - 1)
    return groups, [(e.entry_id, e.seq, e.n, e.compacted_at, e.archives) for e in entries]


async def _applied(settings: Settings, name: str, batches: list[Batch], lost: int | None = None) -> Any:
    """The groups and entries after applying the batches; `lost`: the batch at this index is applied,
    then its conversation write is undone (the worker died between the two), before the next."""
    client = mongo_client(settings.mongo)
    database = client[f"{settings.mongo_db_name}_{name}"]
    try:
        store = MongoConversationArchive(database)
        await store.prepare()
        for index, batch in enumerate(batches):
            await store.apply(plan_archive(batch))
            if index == lost:
                await database["conversations"].delete_one({"_id": conversation_id(MAIN)})
        return await _state(database)
    finally:
        await client.drop_database(f"{settings.mongo_db_name}_{name}")
        await client.close()


async def test_the_groups_are_the_same_whatever_the_batches(settings: Settings) -> None:
    events = _log().events
    whole = await _applied(settings, "whole", [events])
    one_by_one = await _applied(settings, "single", [[e] for e in events for _ in range(2)])  # each twice
    # the first batch's conversation write lost; redelivered from its start, in a longer batch
    redelivered = await _applied(settings, "again", [events[:2], events[:6], events[6:]], lost=0)
    groups, entries = whole
    assert len(entries) == 17 and len(groups) == 5  # four exchanges and the fold's summary
    assert one_by_one == whole
    assert redelivered == whole
    assert [e[3] for e in entries[:4]] == [8] * 4 and entries[4][3] == NEVER  # x0 compacted by the fold at 8


async def test_entries_kept_one_document_each_move_into_groups(
    settings: Settings, database: AsyncDatabase[dict[str, Any]]
) -> None:
    where = {"tenant": "castle", "thread": "session", "owner": "ann", "conversation": "main"}
    legacy = [
        {
            "_id": f"threads:0:{seq}",
            **where,
            "entry_id": f"x0.{role[0]}",
            "seq": seq,
            "exchange_id": "x0",
            "role": role,
            "occurred_at": 1_000 + seq,
            "text": f"{role} text",
            "original": '{"q":1}' if role == "question" else None,
            "subject": "ann",
            "agent": None,
            "enters_prompt": True,
            "compacted_at": NEVER,
            "reset_at": NEVER,
            "archives": [],
            "forked_from": None,
            "terms": [role, "text"],
            "n": seq,
        }
        for seq, role in enumerate(["question", "answer"])
    ]
    await database[LEGACY_ENTRIES].insert_many(legacy)
    store = MongoConversationArchive(database)
    await store.prepare()
    await store.prepare()  # a second start finds nothing left to move
    assert LEGACY_ENTRIES not in await database.list_collection_names()
    found = await store.entries(MAIN, scope="history", snapshot=NEVER - 1)
    assert [(e.entry_id, e.seq, e.n, e.original) for e in found] == [("x0.q", 0, 0, '{"q":1}'), ("x0.a", 1, 1, None)]
    hits = await store.candidates(
        "castle", "session", "ann", ["answer"], conversation=None, scope="history", snapshot=9
    )
    assert [e.entry_id for e in hits] == ["x0.q", "x0.a"]  # a group of one comes with its exchange's other entries


async def test_an_exchange_too_large_for_one_document_is_split(database: AsyncDatabase[dict[str, Any]]) -> None:
    store = MongoConversationArchive(database)
    await store.prepare()
    log = Log()
    result = '"' + "w" * 6_000_000 + '"'  # three of these: 18 MB, past MongoDB's 16 MiB document
    batch = log.add(
        QuestionAsked(envelope(), "x0", "fetch it all"),
        *(ToolCalled(envelope(), "x0", i, "fetch", "{}", result) for i in range(3)),
        AnswerGiven(envelope(), "x0", "done"),
    )
    await store.apply(plan_archive(batch))
    found = await store.entries(MAIN, scope="history", snapshot=NEVER - 1)
    assert [len(e.text) for e in found] == [12, *[len(f"fetch {{}} {result}")] * 3, 4]
    # each result too large to share a document: the question, each result, the answer after them
    assert await database[GROUPS].count_documents({}) == 5


async def test_an_entry_id_held_by_another_group_is_dropped(database: AsyncDatabase[dict[str, Any]]) -> None:
    store = MongoConversationArchive(database)
    await store.prepare()
    log = Log()
    await store.apply(plan_archive(log.exchange(0, "first?", "one") + log.exchange(1, "second?", "two")))
    again = log.add(QuestionAsked(envelope(), "x0", "first, again?"), QuestionAsked(envelope(), "x2", "third?"))
    await store.apply(plan_archive(again))
    await store.apply(plan_archive(log.add(QuestionAsked(envelope(), "x2", "third, again?"))))  # its own group's
    found = await store.entries(MAIN, scope="history", snapshot=NEVER - 1)
    assert [(e.entry_id, e.text) for e in found] == [
        ("x0.q", "first?"),
        ("x0.a", "one"),
        ("x1.q", "second?"),
        ("x1.a", "two"),
        ("x2.q", "third?"),
    ]


async def test_erasing_an_asker_of_a_shared_thread_leaves_no_tail_naming_them(
    database: AsyncDatabase[dict[str, Any]],
) -> None:
    store = MongoConversationArchive(database)
    await store.prepare()
    log = Log()

    def public(subject: str) -> Envelope:
        return Envelope(tenant="castle", subject=subject, thread="public", producer="test", occurred_at=1)

    await store.apply(
        plan_archive(
            log.add(
                QuestionAsked(public("bob"), "x0", "who keeps the gate"),
                AnswerGiven(public("bob"), "x0", "the smith"),
                QuestionAsked(public("ann"), "x1", "where is my chest"),
            )
        )
    )
    shared = ConversationRef("castle", "public", "", "main")
    before = await database["conversations"].find_one({"_id": conversation_id(shared)})
    assert before is not None and before["tail"]["subject"] == "ann"
    assert {p["term"] for p in await database[POSTINGS].find({"subject": "ann"}).to_list()} >= {"chest"}
    assert await store.erase_subject("castle", "ann") == 1
    held = await database[POSTINGS].find({}).to_list()  # the words of ann's text went with her entries
    assert (
        "ann" not in str(held) and "chest" not in {p["term"] for p in held} and {p["subject"] for p in held} == {"bob"}
    )
    after = await database["conversations"].find_one({"_id": conversation_id(shared)})
    assert after is not None and "tail" not in after and "ann" not in str(after)
    assert "ann" not in str(await database[GROUPS].find({}).to_list())
    # the answer to ann's question, after her erasure, starts a group of its own
    await store.apply(plan_archive(log.add(AnswerGiven(public("ann"), "x1", "by the gate"))))
    found = await store.entries(shared, scope="history", snapshot=NEVER - 1)
    assert [(e.entry_id, e.subject) for e in found] == [("x0.q", "bob"), ("x0.a", "bob"), ("x1.a", "ann")]


async def test_a_batch_redelivered_after_a_rename_leaves_the_moved_entries_as_they_became(
    database: AsyncDatabase[dict[str, Any]],
) -> None:
    """The rename took the conversation's document away, so the redelivered entries look new; their group
    (now the target's) keeps the fold's marks on them rather than being written afresh."""
    store = MongoConversationArchive(database)
    await store.prepare()
    log = Log()
    batch = log.exchange(0, "where is the chest", "by the gate") + log.add(
        ThreadFolded(envelope(), "f1", "the chest", ("x0",), "test"), ThreadRenamed(envelope(), "main", "older")
    )
    older = ConversationRef("castle", "session", "ann", "older")
    await store.apply(plan_archive(batch))
    first = await store.entries(older, scope="history", snapshot=NEVER - 1)
    assert [(e.entry_id, e.compacted_at, e.archives) for e in first[:2]] == [
        ("x0.q", 2, ("compact@2",)),
        ("x0.a", 2, ("compact@2",)),
    ]
    await store.apply(plan_archive(batch))  # the worker died before committing: the batch again
    assert await store.entries(older, scope="history", snapshot=NEVER - 1) == first
    assert await store.entries(MAIN, scope="history", snapshot=NEVER - 1) == []


async def test_postings_follow_their_entries_through_a_rename_and_a_purge(
    database: AsyncDatabase[dict[str, Any]],
) -> None:
    """Postings (memlog/adapters/mongo_postings.py) hold words of a subject's text: a rename moves them with their
    groups, a purge (thread deletion, retention) deletes them; a redelivery writes none twice."""
    store = MongoConversationArchive(database)
    await store.prepare()
    log = Log()
    batch = log.exchange(0, "where is the chest", "by the gate")
    await store.apply(plan_archive(batch))
    await store.apply(plan_archive(batch))  # redelivered
    posted = await database[POSTINGS].find({}).to_list()
    assert {p["term"] for p in posted} >= {"chest", "gate"} and {p["conversation"] for p in posted} == {"main"}
    assert len(posted) == len({p["_id"] for p in posted})
    await store.apply(plan_archive(log.add(ThreadRenamed(envelope(), "main", "older"))))
    assert {p["conversation"] for p in await database[POSTINGS].find({}).to_list()} == {"older"}
    await store.apply(plan_archive(log.add(ThreadPurged(envelope(), "older", "test"))))
    assert await database[GROUPS].count_documents({}) == 0
    assert await database[POSTINGS].count_documents({}) == 0
