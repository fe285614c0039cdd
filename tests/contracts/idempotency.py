"""The Idempotency contract, run against every implementation. The clock is the test's, so a
reservation's lapse is tested without waiting for it.

The contract suite; the test module test_idempotency.py runs it against each adapter."""

from __future__ import annotations

from projections.ports import PENDING_SECONDS, Idempotency
from tests.contracts.clocks import Clock

TTL_SECONDS = 3600


ANN = ("castle", "session", "ann", "k1")


ACCEPTED = {"exchange_id": "x1", "position": "threads:0:5", "idempotent": False}


class IdempotencyContract:
    async def test_the_first_reservation_holds_the_key_and_a_second_finds_it_pending(self, keys: Idempotency) -> None:
        assert await keys.reserve(*ANN, "ann") is None
        held = await keys.reserve(*ANN, "ann")
        assert held is not None and (held["state"], held["subject"]) == ("pending", "ann")

    async def test_a_completed_key_gives_every_retry_the_accepted_answer(self, keys: Idempotency) -> None:
        await keys.reserve(*ANN, "ann")
        await keys.complete(*ANN, ACCEPTED)
        for _ in range(2):
            held = await keys.reserve(*ANN, "ann")
            assert held is not None and (held["state"], held["accepted"]) == ("done", ACCEPTED)

    async def test_a_released_key_can_be_reserved_again(self, keys: Idempotency) -> None:
        await keys.reserve(*ANN, "ann")
        await keys.release(*ANN)
        assert await keys.reserve(*ANN, "ann") is None

    async def test_releasing_a_completed_key_keeps_its_answer(self, keys: Idempotency) -> None:
        await keys.reserve(*ANN, "ann")
        await keys.complete(*ANN, ACCEPTED)
        await keys.release(*ANN)
        held = await keys.reserve(*ANN, "ann")
        assert held is not None and held["accepted"] == ACCEPTED

    async def test_a_pending_reservation_lapses_and_the_next_call_takes_it(
        self, keys: Idempotency, clock: Clock
    ) -> None:
        await keys.reserve(*ANN, "ann")
        clock.move(PENDING_SECONDS - 1)
        still = await keys.reserve(*ANN, "ann")
        assert still is not None and still["state"] == "pending"
        clock.move(2)
        assert await keys.reserve(*ANN, "ann") is None
        taken = await keys.reserve(*ANN, "ann")  # the new holder's reservation does not lapse at once
        assert taken is not None and taken["state"] == "pending"

    async def test_a_completed_key_never_lapses(self, keys: Idempotency, clock: Clock) -> None:
        await keys.reserve(*ANN, "ann")
        await keys.complete(*ANN, ACCEPTED)
        clock.move(10 * PENDING_SECONDS)
        held = await keys.reserve(*ANN, "ann")
        assert held is not None and held["accepted"] == ACCEPTED

    async def test_a_key_keeps_the_digest_of_the_body_it_was_reserved_for(self, keys: Idempotency) -> None:
        assert await keys.reserve(*ANN, "ann", "digest-1") is None
        await keys.complete(*ANN, ACCEPTED)
        held = await keys.reserve(*ANN, "ann", "digest-2")
        assert held is not None and (held["digest"], held["accepted"]) == ("digest-1", ACCEPTED)

    async def test_a_lapsed_key_taken_again_keeps_the_new_digest(self, keys: Idempotency, clock: Clock) -> None:
        await keys.reserve(*ANN, "ann", "digest-1")
        clock.move(PENDING_SECONDS + 1)
        assert await keys.reserve(*ANN, "ann", "digest-2") is None
        held = await keys.reserve(*ANN, "ann", "digest-3")
        assert held is not None and held["digest"] == "digest-2"

    async def test_a_completed_key_is_dropped_only_while_it_holds_that_answer(self, keys: Idempotency) -> None:
        await keys.reserve(*ANN, "ann")
        await keys.drop(*ANN, ACCEPTED)  # pending: stays
        assert await keys.reserve(*ANN, "ann") is not None
        await keys.complete(*ANN, ACCEPTED)
        await keys.drop(*ANN, {**ACCEPTED, "position": "threads:0:6"})  # another answer: stays
        assert await keys.reserve(*ANN, "ann") is not None
        await keys.drop(*ANN, ACCEPTED)
        assert await keys.reserve(*ANN, "ann") is None

    async def test_keys_are_held_apart_per_tenant_thread_owner_and_key(self, keys: Idempotency) -> None:
        await keys.reserve(*ANN, "ann")
        for claim in [
            ("castle", "session", "ann", "k2"),
            ("castle", "session", "bob", "k1"),
            ("castle", "automation", "ann", "k1"),
            ("castle:2", "session", "ann", "k1"),
        ]:
            assert await keys.reserve(*claim, claim[2]) is None, claim

    async def test_erasing_a_subject_deletes_their_keys_only(self, keys: Idempotency) -> None:
        await keys.reserve(*ANN, "ann")
        await keys.complete(*ANN, ACCEPTED)
        await keys.reserve("castle", "public", "", "k2", "ann")
        await keys.reserve("castle", "session", "bob", "k1", "bob")
        await keys.reserve("castle:2", "session", "ann", "k1", "ann")
        exported = await keys.export_subject("castle", "ann")
        assert sorted((k["state"], k.get("accepted")) for k in exported) == [("done", ACCEPTED), ("pending", None)]
        assert all((k["tenant"], k["subject"]) == ("castle", "ann") for k in exported)
        assert await keys.erase_subject("castle", "ann") == 2
        assert await keys.export_subject("castle", "ann") == []
        assert await keys.reserve(*ANN, "ann") is None
        assert await keys.reserve("castle", "session", "bob", "k1", "bob") is not None
        assert await keys.reserve("castle:2", "session", "ann", "k1", "ann") is not None
