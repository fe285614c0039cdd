"""The Ledger contract, run against every implementation.

The contract suite; the test module test_ledger.py runs it against each adapter."""

from __future__ import annotations

import os

import pytest

from projections.ports import Ledger
from projections.sealing import subject_digest
from tests.contracts.clocks import Clock

MASTER = os.urandom(32)


class LedgerContract:
    async def test_a_recorded_entry_reads_back_with_its_kind_and_time(self, ledger: Ledger, clock: Clock) -> None:
        entry_id = await ledger.record("erase-requested", tenant="castle", request_id="r1", requested_by="op")
        assert await ledger.get(entry_id) == {
            "_id": entry_id,
            "kind": "erase-requested",
            "at": clock.now,
            "tenant": "castle",
            "request_id": "r1",
            "requested_by": "op",
        }
        assert await ledger.get("no-such-entry") is None

    async def test_a_subject_is_named_only_by_its_keyed_digest(self, ledger: Ledger) -> None:
        entry_id = await ledger.record("erased", tenant="castle", subject="Ann Example", deleted={"facts": 2})
        entry = await ledger.get(entry_id)
        assert entry is not None
        assert entry["subject_digest"] == subject_digest(MASTER, "castle", "Ann Example")
        assert "Ann Example" not in repr(entry) and "subject" not in entry

    async def test_an_entry_id_recorded_again_keeps_its_first_entry(self, ledger: Ledger, clock: Clock) -> None:
        first = clock.now
        assert (
            await ledger.record("erased", entry_id="r1", tenant="castle", subject="ann", deleted={"facts": 2}) == "r1"
        )
        clock.move(5)
        assert (
            await ledger.record("erased", entry_id="r1", tenant="castle", subject="ann", deleted={"facts": 0}) == "r1"
        )
        entry = await ledger.get("r1")
        assert entry is not None and (entry["deleted"], entry["at"]) == ({"facts": 2}, first)

    async def test_entries_come_newest_first_at_most_the_limit(self, ledger: Ledger, clock: Clock) -> None:
        for n in range(4):
            await ledger.record("exported", entry_id=f"e{n}", tenant="castle", subject="ann")
            clock.move(1)
        assert [e["_id"] for e in await ledger.entries(tenant="castle")] == ["e3", "e2", "e1", "e0"]
        assert [e["_id"] for e in await ledger.entries(tenant="castle", limit=2)] == ["e3", "e2"]

    async def test_entries_are_found_by_tenant_subject_and_kind(self, ledger: Ledger, clock: Clock) -> None:
        for entry_id, kind, tenant, subject in [
            ("ann-erased", "erased", "castle", "ann"),
            ("bob-erased", "erased", "castle", "bob"),
            ("ann-exported", "exported", "castle", "ann"),
            ("other-ann-erased", "erased", "castle:2", "ann"),
        ]:
            await ledger.record(kind, entry_id=entry_id, tenant=tenant, subject=subject)
            clock.move(1)
        await ledger.record("replay-started", entry_id="replay", namespace="live-r1")

        async def ids(tenant: str | None = None, subject: str | None = None, kind: str | None = None) -> list[str]:
            return [e["_id"] for e in await ledger.entries(tenant=tenant, subject=subject, kind=kind)]

        assert await ids(tenant="castle", subject="ann") == ["ann-exported", "ann-erased"]
        assert await ids(tenant="castle", subject="ann", kind="erased") == ["ann-erased"]
        assert await ids(tenant="castle:2") == ["other-ann-erased"]
        assert await ids(kind="replay-started") == ["replay"]
        assert len(await ids()) == 5

    async def test_a_subject_is_only_known_within_its_tenant(self, ledger: Ledger) -> None:
        with pytest.raises(ValueError, match="tenant"):
            await ledger.entries(subject="ann")

    async def test_the_latest_erasure_of_a_subject_is_found(self, ledger: Ledger, clock: Clock) -> None:
        assert await ledger.erased("castle", "ann") is None
        await ledger.record("erased", entry_id="first", tenant="castle", subject="ann")
        clock.move(1)
        await ledger.record("erased", entry_id="second", tenant="castle", subject="ann")
        clock.move(1)
        await ledger.record("exported", entry_id="later", tenant="castle", subject="ann")
        await ledger.record("erased", entry_id="bob", tenant="castle", subject="bob")
        found = await ledger.erased("castle", "ann")
        assert found is not None and found["_id"] == "second"
        assert await ledger.erased("castle:2", "ann") is None

    async def test_pages_after_an_entry_keep_the_order_and_break_ties_by_id(self, ledger: Ledger, clock: Clock) -> None:
        for n in range(3):
            await ledger.record("erased", entry_id=f"same-{n}", tenant="castle", subject="ann")
        clock.move(1)
        await ledger.record("erased", entry_id="newest", tenant="castle", subject="ann")
        await ledger.record("erased", entry_id="elsewhere", tenant="castle:2", subject="ann")
        seen: list[str] = []
        before = None
        while page := await ledger.entries(tenant="castle", limit=2, before=before):
            seen += [e["_id"] for e in page]
            before = (page[-1]["at"], page[-1]["_id"])
        assert seen == ["newest", "same-2", "same-1", "same-0"]
