from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from memlog.adapters.mongo_archives import MongoConversationArchive
from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from projections.ports import ConversationArchive
from tests.contracts.clocks import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def database(settings: Settings) -> AsyncIterator[AsyncDatabase[dict[str, Any]]]:
    """The test's own MongoDB database, dropped afterwards."""
    client = mongo_client(settings.mongo)
    try:
        yield client[settings.mongo_db_name]
    finally:
        await client.drop_database(settings.mongo_db_name)
        await client.close()


@pytest.fixture
async def mongo_archive(database: AsyncDatabase[dict[str, Any]]) -> ConversationArchive:
    """A prepared MongoConversationArchive on the test's own database."""
    store = MongoConversationArchive(database)
    await store.prepare()
    return store
