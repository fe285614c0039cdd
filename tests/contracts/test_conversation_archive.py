"""The ConversationArchive contract: each thread operation's effect on active and archived entries,
run against the in-memory reference and the MongoDB-protocol server."""

from __future__ import annotations

import pytest

from memlog.adapters.in_memory import InMemoryConversationArchive
from memlog.adapters.mongo_archives import MongoConversationArchive
from memlog.adapters.mongo_entries import GROUPS
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from projections.archives import NEVER
from projections.ports import ConversationArchive
from schemas.events import (
    ThreadRenamed,
)
from tests.contracts.conversation_archive import (
    MAIN,
    ConversationArchiveContract,
    Log,
    apply_plan,
    envelope,
    replace_conv,
)


def test_never_compares_after_every_offset() -> None:
    assert NEVER > 2**53


class TestInMemoryConversationArchive(ConversationArchiveContract):
    @pytest.fixture
    def archive(self) -> ConversationArchive:
        return InMemoryConversationArchive()


class TestMongoConversationArchive(ConversationArchiveContract):
    @pytest.fixture
    def archive(self, mongo_archive: ConversationArchive) -> ConversationArchive:
        return mongo_archive


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
            await apply_plan(store, log.exchange(n, f"q {n}", f"a {n}"))
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
        await apply_plan(store, batch)
        await apply_plan(store, batch)  # redelivered: no new place
        await apply_plan(store, log.exchange(10, "q 10", "a 10"))
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
            await apply_plan(store, log.exchange(n, f"q {n}", f"a {n}"))
        async for group in database[GROUPS].find({}, {"m": 1}):
            unset = {f"m.{key}.n": "" for key in group["m"]}
            await database[GROUPS].update_one({"_id": group["_id"]}, {"$unset": unset, "$set": {"n": []}})
        await database["conversations"].update_many({}, {"$unset": {"n": ""}})
        await apply_plan(store, log.exchange(3, "q 3", "a 3"))
        await apply_plan(store, log.add(ThreadRenamed(envelope(), "main", "older")))
        every = await store.entries(MAIN, scope="history", snapshot=1_000)
        older = await store.entries(replace_conv("older"), scope="history", snapshot=1_000)
        assert every == [] and [e.n for e in older] == [None] * 8
        first_new = older[6]
        near = await store.neighbours(replace_conv("older"), [first_new.seq], 1, 1_000, older)
        assert [e.seq for e in near[first_new.seq]] == [older[5].seq, older[7].seq]
        await apply_plan(store, log.exchange(4, "q 4", "a 4", conversation="older"))
        assert [e.n for e in await store.entries(replace_conv("older"), scope="history", snapshot=1_000)] == [None] * 10
    finally:
        await client.drop_database(settings.mongo_db_name)
        await client.close()
