"""The FactSlots contract, run against every implementation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from adapters.in_memory import InMemoryFactSlots
from adapters.mongo_store import MongoFactSlots, mongo_client
from config.settings import Settings
from projections.ports import FACT_SLOT_SECONDS, FactSlots
from tests.contracts.clocks import Clock


class FactSlotsContract:
    async def test_reservations_count_until_the_limit(self, slots: FactSlots) -> None:
        held = {"f1", "f2"}
        assert await slots.reserve("castle", "ann", "f3", held, 4)
        assert await slots.reserve("castle", "ann", "f4", held, 4)
        assert not await slots.reserve("castle", "ann", "f5", held, 4)

    async def test_a_reserved_fact_the_projection_holds_counts_once(self, slots: FactSlots) -> None:
        assert await slots.reserve("castle", "ann", "f1", set(), 2)
        assert await slots.reserve("castle", "ann", "f2", {"f1"}, 2)  # f1 applied: held, no longer pending
        assert not await slots.reserve("castle", "ann", "f3", {"f1"}, 2)  # f1 held and f2 pending: full
        assert await slots.reserve("castle", "ann", "f3", {"f1", "f2"}, 3)  # both held: one more fits

    async def test_a_released_reservation_frees_its_slot(self, slots: FactSlots) -> None:
        assert await slots.reserve("castle", "ann", "f1", set(), 1)
        assert not await slots.reserve("castle", "ann", "f2", set(), 1)
        await slots.release("castle", "ann", "f1")
        assert await slots.reserve("castle", "ann", "f2", set(), 1)

    async def test_a_lapsed_reservation_frees_its_slot(self, slots: FactSlots, clock: Clock) -> None:
        assert await slots.reserve("castle", "ann", "f1", set(), 1)
        clock.move(FACT_SLOT_SECONDS - 1)
        assert not await slots.reserve("castle", "ann", "f2", set(), 1)
        clock.move(2)
        assert await slots.reserve("castle", "ann", "f2", set(), 1)

    async def test_subjects_and_tenants_have_their_own_room(self, slots: FactSlots) -> None:
        assert await slots.reserve("castle", "ann", "f1", set(), 1)
        assert await slots.reserve("castle", "bob", "f2", set(), 1)
        assert await slots.reserve("castle:2", "ann", "f3", set(), 1)
        assert await slots.reserve("castl", "e:2:ann", "f4", set(), 1)

    async def test_of_concurrent_reservations_of_the_last_slot_one_wins(self, slots: FactSlots) -> None:
        held = {f"f{n}" for n in range(29)}
        won = await asyncio.gather(*(slots.reserve("castle", "ann", f"new{n}", held, 30) for n in range(12)))
        assert sum(won) == 1

    async def test_erasing_a_subject_drops_their_reservations(self, slots: FactSlots) -> None:
        assert await slots.reserve("castle", "ann", "f1", set(), 1)
        assert await slots.reserve("castle", "bob", "f2", set(), 1)
        assert await slots.erase_subject("castle", "ann") == 1
        assert await slots.reserve("castle", "ann", "f3", set(), 1)
        assert not await slots.reserve("castle", "bob", "f4", set(), 1)


class TestInMemoryFactSlots(FactSlotsContract):
    @pytest.fixture
    def slots(self, clock: Clock) -> FactSlots:
        return InMemoryFactSlots(clock)


class TestMongoFactSlots(FactSlotsContract):
    @pytest.fixture
    async def slots(self, settings: Settings, clock: Clock) -> AsyncIterator[FactSlots]:
        client = mongo_client(settings.mongo)
        store = MongoFactSlots(client[settings.mongo_db_name], clock)
        await store.prepare()
        yield store
        await client.drop_database(settings.mongo_db_name)
        await client.close()
