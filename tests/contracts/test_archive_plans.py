"""Every query the MongoDB archive sends to its entries reads an index on the MongoDB-protocol server
(memlog/adapters/mongo_scans.py): the whole ConversationArchive contract runs again with the driver's command
events recorded, and each filter it sent (finds, updates, deletes) is explained afterwards. A
collection scan there costs 30 to 45 s once the archive holds half a million entries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pymongo.monitoring import CommandFailedEvent, CommandListener, CommandStartedEvent, CommandSucceededEvent

from memlog.adapters.mongo_archives import MongoConversationArchive
from memlog.adapters.mongo_entries import GROUPS
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from projections.ports import ConversationArchive
from tests.contracts.conversation_archive import ConversationArchiveContract


class Sent(CommandListener):
    """The filters of the commands sent to the entries' groups, with the sort of each find."""

    def __init__(self) -> None:
        self.filters: list[tuple[dict[str, Any], dict[str, Any] | None]] = []

    def started(self, event: CommandStartedEvent) -> None:
        command = event.command
        if command.get("find") == GROUPS:
            self.filters.append((dict(command.get("filter", {})), command.get("sort")))
        for kind, key in (("update", "updates"), ("delete", "deletes")):
            if command.get(kind) == GROUPS:
                self.filters += [(dict(statement["q"]), None) for statement in command.get(key, [])]

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass


def stages(plan: dict[str, Any]) -> list[str]:
    found, stage = [], plan["queryPlanner"]["winningPlan"]
    while stage:
        found.append(stage["stage"])
        stage = stage.get("inputStage")
    return found


class TestEveryArchiveQueryReadsAnIndex(ConversationArchiveContract):
    @pytest.fixture
    async def archive(self, settings: Settings) -> AsyncIterator[ConversationArchive]:
        sent = Sent()
        client = mongo_client(settings.mongo, event_listeners=[sent])
        database = client[settings.mongo_db_name]
        store = MongoConversationArchive(database)
        await store.prepare()
        try:
            yield store
            assert sent.filters, "the test sent no query to the entries"
            for query, sort in sent.filters:
                if isinstance(query.get("_id"), str):
                    # an update of one group names its shard key beside `_id`: SecantusDB's explain says
                    # COLLSCAN, but it reads an `_id` equality by `_id` (memlog/adapters/mongo_groups.thread_of)
                    continue
                command: dict[str, Any] = {"find": GROUPS, "filter": query, **({"sort": sort} if sort else {})}
                plan = await database.command("explain", command)
                assert "COLLSCAN" not in stages(plan), (query, sort, plan["queryPlanner"]["winningPlan"])
        finally:
            await client.drop_database(settings.mongo_db_name)
            await client.close()


async def test_a_filter_naming_a_field_outside_the_index_is_a_scan_there(settings: Settings) -> None:
    """The check above can fail: the filters the archive sent before memlog/adapters/mongo_scans.py scan."""
    client = mongo_client(settings.mongo)
    database = client[settings.mongo_db_name]
    try:
        await MongoConversationArchive(database).prepare()
        where = {"tenant": "castle", "thread": "session", "owner": "ann", "conversation": "main"}
        for query in (
            {**where, "last": {"$gt": -1, "$lte": 10}, "m.s3.reset_at": {"$gt": 10}},
            {"tenant": "castle", "thread": "session", "owner": "ann", "ids": "x0.q"},
        ):
            plan = await database.command("explain", {"find": GROUPS, "filter": query})
            assert "COLLSCAN" in stages(plan), plan
        plan = await database.command("explain", {"find": GROUPS, "filter": {**where, "last": {"$lt": 5}}})
        assert "COLLSCAN" not in stages(plan), plan
    finally:
        await client.drop_database(settings.mongo_db_name)
        await client.close()
