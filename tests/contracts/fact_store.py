"""The FactStore contract, run against every implementation.

The contract suite; the test module test_fact_store.py runs it against each adapter."""

from __future__ import annotations

from projections.facts import Fact, SubjectFacts
from projections.ports import FactStore
from projections.position import Position

T0 = 1_795_000_000_000


def facts(*texts: str, expires_at: int = T0 + 1000) -> SubjectFacts:
    return SubjectFacts(
        facts=tuple(Fact(f"f{n}", "shared", None, text, "subject", T0, T0, (text,)) for n, text in enumerate(texts)),
        last_question_at=T0,
        expires_at=expires_at,
    )


class FactStoreContract:
    async def test_written_facts_read_back(self, store: FactStore) -> None:
        assert await store.load("castle", "ann") is None
        assert await store.write("castle", "ann", facts("one", "two"), Position("facts", 1, 4))
        assert await store.load("castle", "ann") == facts("one", "two")
        assert await store.applied("facts", 1) == -1  # the caller advances it, once per batch
        await store.advance(Position("facts", 1, 4))
        assert await store.applied("facts", 1) == 4

    async def test_a_position_already_applied_is_not_applied_twice(self, store: FactStore) -> None:
        await store.write("castle", "ann", facts("new"), Position("facts", 1, 4))
        assert not await store.write("castle", "ann", facts("stale"), Position("facts", 1, 3))
        assert not await store.write("castle", "ann", facts("again"), Position("facts", 1, 4))
        loaded = await store.load("castle", "ann")
        assert loaded is not None and [f.text for f in loaded.facts] == ["new"]

    async def test_a_question_moves_the_kept_until_date_forward_only(self, store: FactStore) -> None:
        await store.write("castle", "ann", facts("one"), Position("facts", 0, 0))
        await store.questioned([("castle", "ann", T0 + 5000), ("castle", "bob", T0)], 1000)
        await store.questioned([("castle", "ann", T0 + 10)], 1000)
        loaded = await store.load("castle", "ann")
        assert loaded is not None and (loaded.last_question_at, loaded.expires_at) == (T0 + 5000, T0 + 6000)
        # a later write with an older date never moves it back
        await store.write("castle", "ann", facts("one", "two"), Position("facts", 0, 1))
        loaded = await store.load("castle", "ann")
        assert loaded is not None and loaded.expires_at == T0 + 6000 and len(loaded.facts) == 2

    async def test_many_subjects_are_written_at_once_skipping_those_applied(self, store: FactStore) -> None:
        await store.write("castle", "ann", facts("ann's"), Position("facts", 0, 5))
        written = await store.write_many(
            [
                ("castle", "ann", facts("stale"), Position("facts", 0, 3)),
                ("castle", "bob", facts("bob's"), Position("facts", 0, 4)),
                ("castle", "cid", facts("cid's"), Position("facts", 0, 6)),
            ]
        )
        assert written == 2
        for subject, text in [("ann", "ann's"), ("bob", "bob's"), ("cid", "cid's")]:
            loaded = await store.load("castle", subject)
            assert loaded is not None and [f.text for f in loaded.facts] == [text]

    async def test_subjects_and_tenants_stay_apart(self, store: FactStore) -> None:
        await store.write("castle", "ann", facts("ann's"), Position("facts", 0, 0))
        await store.write("castle:2", "ann", facts("other tenant's"), Position("facts", 0, 1))
        await store.write("castle", "bob", facts("bob's"), Position("facts", 0, 2))
        for tenant, subject, text in [
            ("castle", "ann", "ann's"),
            ("castle:2", "ann", "other tenant's"),
            ("castle", "bob", "bob's"),
        ]:
            loaded = await store.load(tenant, subject)
            assert loaded is not None and [f.text for f in loaded.facts] == [text]

    async def test_erasing_a_subject_deletes_only_their_facts(self, store: FactStore) -> None:
        await store.write("castle", "ann", facts("one", "two"), Position("facts", 0, 0))
        await store.write("castle", "bob", facts("bob's"), Position("facts", 0, 1))
        await store.write("castle:2", "ann", facts("other tenant's"), Position("facts", 0, 2))
        assert await store.erase_subject("castle", "ann") == 2
        assert await store.load("castle", "ann") is None
        assert await store.export_subject("castle", "ann") == []
        assert await store.load("castle", "bob") is not None and await store.load("castle:2", "ann") is not None
        assert await store.erase_subject("castle", "ann") == 0

    async def test_an_export_shows_each_fact_as_its_owner_sees_it(self, store: FactStore) -> None:
        await store.write("castle", "ann", facts("one", "two"), Position("facts", 0, 0))
        assert await store.export_subject("castle", "ann") == [fact.view() for fact in facts("one", "two").facts]
