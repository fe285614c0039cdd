"""The FactSlots contract, run against every implementation.

The contract suite; the test module test_fact_slots.py runs it against each adapter."""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from projections.ports import FACT_SLOT_SECONDS, FactSlots, HeldFacts
from tests.contracts.clocks import Clock


def of(ids: Collection[str]) -> HeldFacts:
    """What the projection holds, as a reservation reads it."""

    async def held() -> Collection[str]:
        return ids

    return held


class FactSlotsContract:
    async def test_a_fact_applied_while_its_reservation_was_dropped_still_counts(self, slots: FactSlots) -> None:
        """A reservation reads the projection after the reservations: a writer whose view of the
        projection predates another's pruning retries, and then sees the fact as held."""
        base = {f"f{n}" for n in range(28)}
        assert await slots.reserve("castle", "ann", "f28", of(base), 30)
        calls = 0

        async def stale_then_current() -> Collection[str]:
            nonlocal calls
            calls += 1
            if calls == 1:  # meanwhile f28 is applied, and another writer drops its reservation for f29
                assert await slots.reserve("castle", "ann", "f29", of(base | {"f28"}), 30)
                return base
            return base | {"f28"}

        assert not await slots.reserve("castle", "ann", "f30", stale_then_current, 30)  # 28 + f28 + f29
        assert calls == 2

    async def test_reservations_count_until_the_limit(self, slots: FactSlots) -> None:
        held = {"f1", "f2"}
        assert await slots.reserve("castle", "ann", "f3", of(held), 4)
        assert await slots.reserve("castle", "ann", "f4", of(held), 4)
        assert not await slots.reserve("castle", "ann", "f5", of(held), 4)

    async def test_a_reserved_fact_the_projection_holds_counts_once(self, slots: FactSlots) -> None:
        assert await slots.reserve("castle", "ann", "f1", of(set()), 2)
        assert await slots.reserve("castle", "ann", "f2", of({"f1"}), 2)  # f1 applied: held, no longer pending
        assert not await slots.reserve("castle", "ann", "f3", of({"f1"}), 2)  # f1 held and f2 pending: full
        assert await slots.reserve("castle", "ann", "f3", of({"f1", "f2"}), 3)  # both held: one more fits

    async def test_a_released_reservation_frees_its_slot(self, slots: FactSlots) -> None:
        assert await slots.reserve("castle", "ann", "f1", of(set()), 1)
        assert not await slots.reserve("castle", "ann", "f2", of(set()), 1)
        await slots.release("castle", "ann", "f1")
        assert await slots.reserve("castle", "ann", "f2", of(set()), 1)

    async def test_a_lapsed_reservation_frees_its_slot(self, slots: FactSlots, clock: Clock) -> None:
        assert await slots.reserve("castle", "ann", "f1", of(set()), 1)
        clock.move(FACT_SLOT_SECONDS - 1)
        assert not await slots.reserve("castle", "ann", "f2", of(set()), 1)
        clock.move(2)
        assert await slots.reserve("castle", "ann", "f2", of(set()), 1)

    async def test_subjects_and_tenants_have_their_own_room(self, slots: FactSlots) -> None:
        assert await slots.reserve("castle", "ann", "f1", of(set()), 1)
        assert await slots.reserve("castle", "bob", "f2", of(set()), 1)
        assert await slots.reserve("castle:2", "ann", "f3", of(set()), 1)
        assert await slots.reserve("castl", "e:2:ann", "f4", of(set()), 1)

    async def test_of_concurrent_reservations_of_the_last_slot_one_wins(self, slots: FactSlots) -> None:
        held = {f"f{n}" for n in range(29)}
        won = await asyncio.gather(*(slots.reserve("castle", "ann", f"new{n}", of(held), 30) for n in range(12)))
        assert sum(won) == 1

    async def test_erasing_a_subject_drops_their_reservations(self, slots: FactSlots) -> None:
        assert await slots.reserve("castle", "ann", "f1", of(set()), 1)
        assert await slots.reserve("castle", "bob", "f2", of(set()), 1)
        assert await slots.erase_subject("castle", "ann") == 1
        assert await slots.reserve("castle", "ann", "f3", of(set()), 1)
        assert not await slots.reserve("castle", "bob", "f4", of(set()), 1)
