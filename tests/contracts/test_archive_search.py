"""The ArchiveSearch contract: candidates across the threads of a tenant, of one agent or of all,
run against the in-memory reference and the MongoDB-protocol server (with its indexes)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.in_memory import InMemoryConversationArchive
from memlog.adapters.mongo_archives import MongoConversationArchive
from memlog.adapters.mongo_entries import GROUPS
from memlog.adapters.mongo_search import MongoArchiveSearch
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from projections.archives import plan_archive
from projections.ports import ArchiveSearch, ConversationArchive
from projections.position import Position
from projections.relevance import query_of
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent

T0 = 1_795_000_000_000
Pair = tuple[ConversationArchive, ArchiveSearch]


def _env(tenant: str, thread: str, agent: str | None, subject: str | None = None) -> Envelope:
    return Envelope(tenant=tenant, thread=thread, subject=subject, agent=agent, producer="test", occurred_at=T0)


class Partitions:
    """Events at consecutive offsets of each partition, as the broker would hand them over."""

    def __init__(self) -> None:
        self.offsets: dict[int, int] = {}

    def exchange(
        self, partition: int, env: Envelope, exchange_id: str, question: str, answer: str
    ) -> list[tuple[ThreadEvent, Position]]:
        batch: list[tuple[ThreadEvent, Position]] = []
        for event in (QuestionAsked(env, exchange_id, question), AnswerGiven(env, exchange_id, answer)):
            offset = self.offsets.get(partition, 0)
            batch.append((event, Position("threads", partition, offset)))
            self.offsets[partition] = offset + 1
        return batch


async def _load(archive: ConversationArchive) -> None:
    log = Partitions()
    batches = [
        log.exchange(0, _env("castle", "session", "smith", "ann"), "a1", "the red chest by the gate", "ok"),
        log.exchange(0, _env("castle", "session", "baker", "ann"), "a2", "the red chest of bread", "ok"),
        log.exchange(1, _env("castle", "session", "smith", "bob"), "b1", "forge me a red chest", "done"),
        log.exchange(2, _env("castle", "automation", "smith"), "s1", "inventory red chest count", "3"),
        log.exchange(2, _env("castle", "public", "baker", "cid"), "p1", "who sells a red chest", "the smith"),
        log.exchange(3, _env("keep", "session", "smith", "ann"), "k1", "the red chest elsewhere", "no"),
    ]
    for batch in batches:
        await archive.apply(plan_archive(batch))


class ArchiveSearchContract:
    async def test_an_agent_sees_the_entries_it_took_part_in_across_threads(self, pair: Pair) -> None:
        archive, search = pair
        await _load(archive)
        found = await search.across("castle", ["chest", "red"], agent="smith")
        assert sorted((e.ref.thread, e.ref.owner, e.entry_id) for e in found) == [  # whole exchanges
            ("automation", "smith", "s1.a"),
            ("automation", "smith", "s1.q"),
            ("session", "ann", "a1.a"),
            ("session", "ann", "a1.q"),
            ("session", "bob", "b1.a"),
            ("session", "bob", "b1.q"),
        ]
        assert {e.agent for e in found} == {"smith"}

    async def test_an_operator_sees_every_thread_of_the_tenant_and_no_other(self, pair: Pair) -> None:
        archive, search = pair
        await _load(archive)
        found = await search.across("castle", ["chest"], agent=None)
        assert sorted(e.entry_id for e in found if e.role == "question") == ["a1.q", "a2.q", "b1.q", "p1.q", "s1.q"]
        assert {e.ref.tenant for e in found} == {"castle"}

    async def test_terms_narrow_and_no_terms_mean_every_entry(self, pair: Pair) -> None:
        archive, search = pair
        await _load(archive)
        assert [e.entry_id for e in await search.across("castle", ["forg"], agent="smith")] == ["b1.q", "b1.a"]
        assert await search.across("castle", ["forg"], agent="baker") == []
        everything = await search.across("castle", [], agent="baker")
        assert sorted(e.entry_id for e in everything) == ["a2.a", "a2.q", "p1.a", "p1.q"]

    async def test_candidates_of_at_most_limit_exchanges(self, pair: Pair) -> None:
        archive, search = pair
        await _load(archive)
        found = await search.across("castle", ["chest"], agent=None, limit=3)
        assert len({(e.ref, e.exchange_id) for e in found}) == 3

    async def test_a_late_sorting_word_of_a_5000_token_entry_is_a_candidate(self, pair: Pair) -> None:
        archive, search = pair
        words = " ".join(f"w{n:05d}" for n in range(4_999)) + " zymurgy"
        batch = Partitions().exchange(0, _env("castle", "session", "smith", "ann"), "x", "a long one", words)
        await archive.apply(plan_archive(batch))
        for agent in ("smith", None):
            found = await search.across("castle", query_of("zymurgy").lookup, agent=agent)
            assert [e.entry_id for e in found] == ["x.q", "x.a"]

    async def test_a_common_term_is_cut_to_the_exchanges_where_it_weighs_most(self, pair: Pair) -> None:
        archive, search = pair
        log = Partitions()
        for n in range(6):  # "lantern" in every exchange, more often in later ones; "zephyr" in one
            answer = " ".join(["lantern"] * (n + 1) + ["ledger"] * (12 - n) + (["zephyr"] if n == 1 else []))
            env = _env("castle", "session", "smith", "ann")
            await archive.apply(plan_archive(log.exchange(0, env, f"e{n}", f"day {n}", answer)))
        lookup = query_of("lantern zephyr").lookup
        found, cut = await search.bounded("castle", lookup, agent="smith", per_term=2)
        assert cut  # six exchanges hold lantern: its two best are read, and zephyr's one
        assert sorted({e.exchange_id for e in found}) == ["e1", "e4", "e5"]
        assert {e.entry_id for e in found if e.exchange_id == "e5"} == {"e5.q", "e5.a"}  # whole exchanges
        whole, cut = await search.bounded("castle", lookup, agent="smith", per_term=6)
        assert not cut
        assert sorted(e.entry_id for e in whole) == sorted(
            e.entry_id for e in await search.across("castle", lookup, agent="smith")
        )
        assert await search.bounded("castle", lookup, agent="baker", per_term=2) == ([], False)
        # an operator's: every agent's exchanges, cut the same way (here a baker's lantern outweighs them all)
        env = _env("castle", "session", "baker", "bob")
        await archive.apply(plan_archive(log.exchange(1, env, "b0", "night", "lantern " * 12 + "ledger")))
        found, cut = await search.bounded("castle", lookup, agent=None, per_term=2)
        assert cut and sorted({e.exchange_id for e in found}) == ["b0", "e1", "e5"]
        whole, cut = await search.bounded("castle", lookup, agent=None, per_term=7)
        assert not cut and sorted({e.exchange_id for e in whole}) == ["b0", "e0", "e1", "e2", "e3", "e4", "e5"]


class TestInMemoryArchiveSearch(ArchiveSearchContract):
    @pytest.fixture
    def pair(self) -> Pair:
        archive = InMemoryConversationArchive()
        return archive, archive


class TestMongoArchiveSearch(ArchiveSearchContract):
    @pytest.fixture
    async def pair(self, settings: Settings) -> AsyncIterator[Pair]:
        client = mongo_client(settings.mongo)
        database = client[settings.mongo_db_name]
        archive, search = MongoConversationArchive(database), MongoArchiveSearch(database)
        await archive.prepare()
        await search.prepare()
        yield archive, search
        await client.drop_database(settings.mongo_db_name)
        await client.close()


async def test_the_search_indexes_exist_and_the_query_uses_one(settings: Settings) -> None:
    client = mongo_client(settings.mongo)
    database = client[settings.mongo_db_name]
    try:
        archive, search = MongoConversationArchive(database), MongoArchiveSearch(database)
        await archive.prepare()
        await search.prepare()
        await _load(archive)
        names = {index["name"] for index in await (await database[GROUPS].list_indexes()).to_list()}
        assert "by_agent_term" in names and "by_tenant_term" not in names
        # an agent's search, the backends' route, reads the index; an operator's (rare) reads its
        # tenant prefix on MongoDB (bounds on tenant and terms), and SecantusDB scans the collection
        for agent, index in (("smith", "by_agent_term"),):
            query = search.across_query("castle", ["chest", "red"], agent=agent)
            plan = await database.command("explain", {"find": GROUPS, "filter": query})
            assert "COLLSCAN" not in str(plan) and f"'indexName': '{index}'" in str(plan), plan
    finally:
        await client.drop_database(settings.mongo_db_name)
        await client.close()
