"""The NamespacePointer contract, run against every implementation.

The contract suite; the test module test_namespace_pointer.py runs it against each adapter."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from projections.ports import NamespacePointer
from schemas.errors import Conflict

Open = Callable[[str], NamespacePointer]  # the pointer of an app id, over the same stored pointers


class NamespacePointerContract:
    async def test_no_namespace_is_active_before_a_switch(self, open_pointer: Open) -> None:
        assert await open_pointer("memlog").active() is None

    async def test_the_last_switch_holds_for_every_reader(self, open_pointer: Open) -> None:
        pointer = open_pointer("memlog")
        await pointer.switch("live-r1", previous="live", switched_at=dt.datetime.now(dt.UTC), projections=["facts"])
        assert await pointer.active() == "live-r1"
        await pointer.switch("live-r2", previous="live-r1")
        assert await pointer.active() == "live-r2"
        assert await open_pointer("memlog").active() == "live-r2"

    async def test_a_switch_from_a_namespace_is_refused_once_the_pointer_moved(self, open_pointer: Open) -> None:
        """Issue 41: two replays that started from `live` cannot both switch; the second is refused."""
        pointer = open_pointer("memlog")
        await pointer.switch("live-r1", previous="live")
        with pytest.raises(Conflict) as refused:
            await pointer.switch("live-r2", previous="live")
        assert "live-r1" in str(refused.value)
        assert await pointer.active() == "live-r1"

    async def test_apps_point_apart(self, open_pointer: Open) -> None:
        await open_pointer("memlog").switch("live-r1")
        assert await open_pointer("memlog-2").active() is None
        await open_pointer("memlog-2").switch("live-r9")
        assert await open_pointer("memlog").active() == "live-r1"
