"""The KeyVault contract, run against every implementation.

The contract suite; the test module test_key_vault.py runs it against each adapter."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from projections.periods import period_of, period_range
from projections.ports import KeyVault
from projections.sealing import KEY_BYTES, SealError
from schemas.errors import SubjectErasing

MASTER = os.urandom(32)
JAN = 1_767_225_600_000 + 9 * 86_400_000  # 2026-01-10 UTC
FEB = JAN + 31 * 86_400_000


Open = Callable[[bytes], KeyVault]  # a vault over the same stored keys, with this master key


class KeyVaultContract:
    async def test_a_subject_keeps_one_data_key(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        key_id, key = await vault.key_for_write("castle", "ann")
        assert len(key) == KEY_BYTES
        assert await vault.key_for_write("castle", "ann") == (key_id, key)
        assert await open_vault(MASTER).key_for_write("castle", "ann") == (key_id, key)

    async def test_subjects_and_tenants_have_keys_of_their_own(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        made = [
            await vault.key_for_write(tenant, subject)
            for tenant, subject in [("castle", "ann"), ("castle", "bob"), ("castle:2", "ann")]
        ]
        assert len({key_id for key_id, _ in made}) == len({key for _, key in made}) == 3

    async def test_a_tenant_has_a_key_of_its_own_that_no_erasure_takes(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        tenant_key = await vault.key_for_write("castle", None)
        subjects = [await vault.key_for_write("castle", name) for name in ("ann", "4:castle", ":", "castle")]
        others = [await vault.key_for_write("castle:2", None), await vault.key_for_write("castl", None)]
        assert len({key_id for key_id, _ in [tenant_key, *subjects, *others]}) == 7
        assert await open_vault(MASTER).key_for_write("castle", None) == tenant_key
        for name in ("ann", "4:castle", ":", "castle"):
            await vault.begin_erasure("castle", name)
            await vault.delete("castle", name)
        assert await vault.key_for_write("castle", None) == tenant_key
        assert await vault.keys_by_id([tenant_key[0]]) == dict([tenant_key])

    async def test_keys_are_found_by_id(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        ann, bob = await vault.key_for_write("castle", "ann"), await vault.key_for_write("castle", "bob")
        assert await vault.keys_by_id([ann[0], bob[0], "no-such-key"]) == dict([ann, bob])
        assert await vault.keys_by_id([]) == {}

    async def test_a_subject_being_erased_can_neither_write_nor_read(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        ann, bob = await vault.key_for_write("castle", "ann"), await vault.key_for_write("castle", "bob")
        await vault.begin_erasure("castle", "ann")
        with pytest.raises(SubjectErasing):
            await vault.key_for_write("castle", "ann")
        assert await vault.keys_by_id([ann[0], bob[0]]) == dict([bob])
        assert await vault.key_for_write("castle", "bob") == bob

    async def test_a_subject_being_erased_cannot_take_its_period_key_already_made(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        january = await vault.key_for_write("castle", "ann", JAN)
        bob = await vault.key_for_write("castle", "bob", JAN)
        assert await vault.key_for_write("castle", "ann", JAN) == january  # both keys there: found together
        await vault.begin_erasure("castle", "ann")
        for take in (vault.key_for_write, vault.key_in_use):
            with pytest.raises(SubjectErasing):
                await take("castle", "ann", JAN)
        assert await vault.key_for_write("castle", "bob", JAN) == bob

    async def test_a_deleted_key_is_gone_for_good_and_a_new_write_makes_another(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        old_id, old_key = await vault.key_for_write("castle", "ann")
        await vault.begin_erasure("castle", "ann")
        assert await vault.delete("castle", "ann") == 1
        assert await vault.delete("castle", "ann") == 0
        assert await vault.keys_by_id([old_id]) == {}
        new_id, new_key = await vault.key_for_write("castle", "ann")
        assert (new_id, new_key) != (old_id, old_key) and new_id != old_id
        assert await vault.keys_by_id([old_id, new_id]) == {new_id: new_key}

    async def test_erasing_a_subject_without_a_key_changes_nothing(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        bob = await vault.key_for_write("castle", "bob")
        await vault.begin_erasure("castle", "ann")
        assert await vault.delete("castle", "ann") == 0
        assert await vault.keys_by_id([bob[0]]) == dict([bob])

    async def test_another_master_key_cannot_unwrap_the_stored_keys(self, open_vault: Open) -> None:
        key_id, _ = await open_vault(MASTER).key_for_write("castle", "ann")
        stranger = open_vault(os.urandom(32))
        with pytest.raises(SealError):
            await stranger.keys_by_id([key_id])
        with pytest.raises(SealError):
            await stranger.key_for_write("castle", "ann")

    async def test_a_subject_has_a_key_per_period_beside_its_standing_key(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        standing = await vault.key_for_write("castle", "ann")
        january, february = (
            await vault.key_for_write("castle", "ann", JAN),
            await vault.key_for_write("castle", "ann", FEB),
        )
        assert period_of(standing[0]) is None
        assert period_of(january[0]) == "m2026-01" and period_of(february[0]) == "m2026-02"
        assert len({standing[1], january[1], february[1]}) == 3
        assert await vault.key_for_write("castle", "ann", JAN + 86_400_000) == january  # the same month
        assert await open_vault(MASTER).key_in_use("castle", "ann", JAN) == january
        assert await vault.key_for_write("castle", "bob", JAN) != january
        assert await vault.key_for_write("castle", None, JAN) == await vault.key_for_write("castle", None)
        ids = [standing[0], january[0], february[0]]
        assert await vault.keys_by_id(ids) == dict([standing, january, february])

    async def test_key_in_use_makes_no_key_for_a_subject_without_one(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        assert await vault.key_in_use("castle", "ann", JAN) is None
        await vault.key_for_write("castle", "ann")
        made = await vault.key_in_use("castle", "ann", JAN)  # the subject has keys: its period's is made
        assert made is not None and period_of(made[0]) == "m2026-01"

    async def test_due_period_keys_are_shredded_and_the_rest_stay(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        standing = await vault.key_for_write("castle", "ann")
        january, february = (
            await vault.key_for_write("castle", "ann", JAN),
            await vault.key_for_write("castle", "ann", FEB),
        )
        bob_january = await vault.key_for_write("castle", "bob", JAN)
        tenant = await vault.key_for_write("castle", None)
        end_of_january = period_range("m2026-01")[1]
        assert await vault.shred_periods(end_of_january - 1) == 0
        assert await vault.shred_periods(end_of_january) == 2
        ids = [standing[0], january[0], february[0], bob_january[0], tenant[0]]
        assert await vault.keys_by_id(ids) == dict([standing, february, tenant])
        assert await vault.shred_periods(end_of_january) == 0

    async def test_an_erasure_takes_every_key_of_the_subject(self, open_vault: Open) -> None:
        vault = open_vault(MASTER)
        ann = [await vault.key_for_write("castle", "ann", at) for at in (None, JAN, FEB)]
        bob = await vault.key_for_write("castle", "bob", JAN)
        await vault.begin_erasure("castle", "ann")
        with pytest.raises(SubjectErasing):
            await vault.key_for_write("castle", "ann", FEB)
        assert await vault.keys_by_id([key_id for key_id, _ in [*ann, bob]]) == dict([bob])
        assert await vault.delete("castle", "ann") == 3
        assert await vault.key_in_use("castle", "ann", JAN) is None
