"""The ArchiveStore contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.in_memory import InMemoryArchiveStore
from adapters.mongo_store import MongoArchiveStore, mongo_client
from config.settings import Settings
from projections.ports import ArchivedEvent, ArchiveStore
from projections.position import Position


def _event(offset: int, subject: str = "ann", tenant: str = "castle", partition: int = 0) -> ArchivedEvent:
    return ArchivedEvent(
        position=Position("threads", partition, offset),
        tenant=tenant,
        subject=subject,
        thread="session",
        exchange_id=f"x{offset}",
        event_type="memlog.QuestionAsked",
        occurred_at=1_795_000_000_000 + offset,
        record={"question": f"q{offset}", "nested": {"list": [1, "two", None]}},
    )


class ArchiveStoreContract:
    async def test_events_read_back_in_log_order(self, archive: ArchiveStore) -> None:
        assert await archive.append([_event(2), _event(0), _event(1)]) == 3
        found = await archive.events("castle", "ann", "session")
        assert [e.position.offset for e in found] == [0, 1, 2]
        assert found[0] == _event(0)

    async def test_appending_a_stored_position_again_is_a_no_op(self, archive: ArchiveStore) -> None:
        await archive.append([_event(0), _event(1)])
        assert await archive.append([_event(1), _event(2)]) == 1
        assert len(await archive.events("castle", "ann", "session")) == 3

    async def test_tenants_and_subjects_stay_apart(self, archive: ArchiveStore) -> None:
        await archive.append([_event(0), _event(1, subject="bob"), _event(2, tenant="other")])
        assert [e.subject for e in await archive.events("castle", "ann", "session")] == ["ann"]
        assert await archive.count("castle") == 2
        assert await archive.count("other") == 1

    async def test_erasing_a_subject_deletes_only_its_events(self, archive: ArchiveStore) -> None:
        await archive.append([_event(0), _event(1, subject="bob"), _event(2, tenant="other")])
        assert [e["record"]["question"] for e in await archive.export_subject("castle", "ann")] == ["q0"]
        assert await archive.erase_subject("castle", "ann") == 1
        assert await archive.export_subject("castle", "ann") == []
        assert await archive.count("castle") == 1 and await archive.count("other") == 1

    async def test_an_export_holds_each_event_with_its_position_in_log_order(self, archive: ArchiveStore) -> None:
        await archive.append([_event(3, partition=1), _event(2), _event(1, subject="bob")])
        assert await archive.export_subject("castle", "ann") == [
            {
                "topic": "threads",
                "partition": partition,
                "offset": offset,
                "tenant": "castle",
                "subject": "ann",
                "thread": "session",
                "exchange_id": f"x{offset}",
                "event_type": "memlog.QuestionAsked",
                "occurred_at": 1_795_000_000_000 + offset,
                "record": {"question": f"q{offset}", "nested": {"list": [1, "two", None]}},
            }
            for partition, offset in [(0, 2), (1, 3)]
        ]


class TestInMemoryArchiveStore(ArchiveStoreContract):
    @pytest.fixture
    def archive(self) -> ArchiveStore:
        return InMemoryArchiveStore()


class TestMongoArchiveStore(ArchiveStoreContract):
    @pytest.fixture
    async def archive(self, settings: Settings) -> AsyncIterator[ArchiveStore]:
        client = mongo_client(settings.mongo)
        store = MongoArchiveStore(client[settings.mongo_db_name])
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()
