"""The NamespaceRegistry contract, run against every implementation.

The contract suite; the test module test_namespace_registry.py runs it against each adapter."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from projections.namespaces import ABANDONED, ACTIVE, BUILDING, PREVIOUS
from projections.ports import NamespaceRegistry
from schemas.errors import Conflict
from tests.contracts.clocks import Clock

Open = Callable[[str], NamespaceRegistry]  # the registry of an app id, over the same stored registries


async def states(registry: NamespaceRegistry) -> dict[str, str]:
    return {entry.namespace: entry.state for entry in await registry.entries()}


class NamespaceRegistryContract:
    async def test_nothing_is_recorded_at_first(self, open_registry: Open) -> None:
        registry = open_registry("memlog")
        assert await registry.entries() == []
        assert await registry.get("live") is None

    async def test_a_replay_builds_then_switches_and_the_active_one_becomes_previous(
        self, open_registry: Open, clock: Clock
    ) -> None:
        registry = open_registry("memlog")
        assert await registry.activate("live") == []
        started = clock.now
        clock.move(10)
        await registry.building("live-r1", "replay of facts by cli")
        building = await registry.get("live-r1")
        assert building is not None and building.state == BUILDING and building.note == "replay of facts by cli"
        assert building.seen_at == clock.now and building.retired_at is None
        clock.move(30)
        await registry.heard("live-r1")
        heard = await registry.get("live-r1")
        assert heard is not None and heard.seen_at == clock.now
        clock.move(5)
        assert await registry.activate("live-r1") == ["live"]
        assert await states(registry) == {"live": PREVIOUS, "live-r1": ACTIVE}
        previous = await registry.get("live")
        assert previous is not None and previous.retired_at == clock.now and previous.created_at == started
        active = await registry.get("live-r1")
        assert active is not None and active.retired_at is None and active.since == clock.now
        assert await registry.activate("live-r1") == []  # once active, activating again changes nothing
        again = await registry.get("live-r1")
        assert again is not None and again.since == active.since

    async def test_the_active_namespace_cannot_be_built_into(self, open_registry: Open) -> None:
        registry = open_registry("memlog")
        await registry.activate("live")
        with pytest.raises(Conflict, match="live is the active namespace"):
            await registry.building("live")
        assert await states(registry) == {"live": ACTIVE}

    async def test_a_replay_without_a_switch_leaves_an_abandoned_namespace(
        self, open_registry: Open, clock: Clock
    ) -> None:
        registry = open_registry("memlog")
        await registry.activate("live")
        await registry.building("live-r1")
        clock.move(60)
        await registry.abandon("live-r1", "built with --no-switch")
        entry = await registry.get("live-r1")
        assert entry is not None and entry.state == ABANDONED and entry.note == "built with --no-switch"
        assert entry.retired_at == clock.now
        await registry.abandon("live", "no")  # only a building namespace is abandoned
        assert await states(registry) == {"live": ACTIVE, "live-r1": ABANDONED}

    async def test_a_namespace_found_is_adopted_once(self, open_registry: Open, clock: Clock) -> None:
        registry = open_registry("memlog")
        await registry.activate("live")
        assert await registry.adopt("live-r0", "found") is True
        found_at = clock.now
        clock.move(60)
        assert await registry.adopt("live-r0", "found again") is False
        assert await registry.adopt("live", "found") is False
        adopted = await registry.get("live-r0")
        assert adopted is not None and adopted.state == PREVIOUS and adopted.note == "found"
        assert adopted.retired_at == found_at  # its grace period starts when it is found
        assert await states(registry) == {"live": ACTIVE, "live-r0": PREVIOUS}

    async def test_a_removed_namespace_is_forgotten(self, open_registry: Open) -> None:
        registry = open_registry("memlog")
        await registry.activate("live")
        await registry.building("live-r1")
        await registry.remove("live-r1")
        await registry.remove("never-was")
        assert await registry.get("live-r1") is None
        assert await states(registry) == {"live": ACTIVE}

    async def test_entries_are_listed_oldest_first(self, open_registry: Open, clock: Clock) -> None:
        registry = open_registry("memlog")
        for name in ("live", "live-r2", "live-r1"):
            await registry.building(name)
            clock.move(1)
        assert [entry.namespace for entry in await registry.entries()] == ["live", "live-r2", "live-r1"]

    async def test_apps_keep_their_namespaces_apart(self, open_registry: Open) -> None:
        await open_registry("memlog").activate("live")
        await open_registry("memlog-2").activate("live")
        await open_registry("memlog-2").activate("live-r1")
        assert await states(open_registry("memlog")) == {"live": ACTIVE}
        assert await states(open_registry("memlog-2")) == {"live": PREVIOUS, "live-r1": ACTIVE}
        # an app id and a namespace that would run together under a plain separator stay apart
        await open_registry("a:b").activate("c")
        await open_registry("a").activate("b:c")
        assert await states(open_registry("a:b")) == {"c": ACTIVE}
        assert await states(open_registry("a")) == {"b:c": ACTIVE}
