"""An erasure reaches every namespace the registry holds, and namespaces go once out of use, on the
in-memory stores (streams.steps.privacy, streams.namespaces)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os

import pytest

from memlog.adapters.in_memory import (
    InMemoryExports,
    InMemoryKeyVault,
    InMemoryLedger,
    InMemoryNamespacePointer,
    InMemoryNamespaceRegistry,
)
from memlog.config.settings import Settings
from projections.namespaces import ABANDONED, ACTIVE, BUILDING, PREVIOUS
from schemas.errors import Conflict, NotFound, StoreRefused
from streams.namespaces import Namespaces, NamespaceStores
from streams.sealer import Sealer
from streams.steps.privacy import NamespaceData, SubjectData, erase
from tests.contracts.clocks import Clock
from tests.unit.subject_stores import InMemoryNamespace, everything_about, remember

NOTHING = [None, [], [], [], [], [], [], [], None]


async def nothing_held() -> list[str]:
    return []


@pytest.fixture
def clock() -> Clock:
    return Clock()


@dataclasses.dataclass
class Namespace(InMemoryNamespace):
    """One namespace's in-memory stores; `drop` empties them, as dropping a database does."""

    dropped: bool = False

    async def drop(self) -> None:
        self.empty()
        self.dropped = True


class App:
    """The namespaces of one app: their stores, the pointer, the registry, and the privacy stores."""

    def __init__(self, clock: Clock, grace_seconds: int = 3600) -> None:
        self.held: dict[str, Namespace] = {}
        self.pointer = InMemoryNamespacePointer()
        self.registry = InMemoryNamespaceRegistry(clock)
        self.vault = InMemoryKeyVault(os.urandom(32))
        self.exports = InMemoryExports()
        self.ledger = InMemoryLedger(os.urandom(32))
        settings = Settings(namespace="live", namespace_grace_seconds=grace_seconds)
        self.namespaces = Namespaces(settings, self.pointer, self.registry, self.open, clock=clock)

    def open(self, name: str) -> NamespaceStores:
        return self.held.setdefault(name, Namespace())

    def data(self, name: str) -> SubjectData:
        stores = self.held.setdefault(name, Namespace())
        return SubjectData.of(
            stores,
            exports=self.exports,
            vault=self.vault,
            ledger=self.ledger,
            sealer=Sealer(self.vault),
            others=lambda: self._others(name),
        )

    async def _others(self, besides: str) -> dict[str, NamespaceData]:
        return await self.namespaces.others(besides)


async def test_an_erasure_leaves_nothing_in_the_previous_abandoned_or_building_namespace(clock: Clock) -> None:
    app = App(clock)
    await app.registry.activate("live")
    for name in ("live-r1", "live-r2", "live-r3"):
        await app.registry.building(name)
    await app.namespaces.switch("live-r1")  # live is previous now
    await app.registry.abandon("live-r2", "built with --no-switch")  # live-r3 is still being built
    for offset, name in enumerate(("live", "live-r1", "live-r2", "live-r3")):
        await remember(app.data(name), "ann", offset * 10)
        await remember(app.data(name), "bob", offset * 10 + 100)
        slots = app.held[name].fact_slots
        assert slots is not None and await slots.reserve("castle", "ann", "f-new", nothing_held, 30)
    assert dict((e.namespace, e.state) for e in await app.registry.entries()) == {
        "live": PREVIOUS,
        "live-r1": ACTIVE,
        "live-r2": ABANDONED,
        "live-r3": BUILDING,
    }
    entry = await erase(app.data("live-r1"), "castle", "ann", "req-1", "op")
    for name in ("live", "live-r1", "live-r2", "live-r3"):
        assert await everything_about(app.data(name), "ann") == NOTHING, name
        assert all(await everything_about(app.data(name), "bob")), name
    assert entry["deleted"]["facts"] == 1 and entry["deleted"]["fact_slots"] == 1  # the worker's own namespace
    assert set(entry["deleted_elsewhere"]) == {"live", "live-r2", "live-r3"}
    assert all(count > 0 for count in entry["deleted_elsewhere"].values())


async def test_the_active_namespace_and_a_live_replay_s_are_not_dropped(clock: Clock) -> None:
    app = App(clock)
    await app.registry.activate("live")
    await app.registry.building("live-r1")
    with pytest.raises(Conflict, match="live is the active namespace"):
        await app.namespaces.drop("live")
    with pytest.raises(Conflict, match="a replay is building live-r1"):
        await app.namespaces.drop("live-r1")
    with pytest.raises(NotFound, match="no namespace live-r9"):
        await app.namespaces.drop("live-r9")
    await app.pointer.switch("live-r1")  # the pointer is the truth, whatever the registry holds
    with pytest.raises(Conflict, match="live-r1 is the active namespace"):
        await app.namespaces.drop("live-r1")
    assert not any(stores.dropped for stores in app.held.values())


async def test_namespaces_out_of_use_go_once_the_grace_period_has_passed(clock: Clock) -> None:
    app = App(clock, grace_seconds=3600)
    await app.registry.activate("live")
    await app.registry.building("live-r1")
    await app.registry.abandon("live-r1", "built with --no-switch")
    await app.registry.building("live-r2")
    app.open("live-r1")
    clock.move(1800)
    await app.namespaces.switch("live-r2")
    assert await app.namespaces.drop_due() == []
    clock.move(1800)
    assert await app.namespaces.drop_due() == ["live-r1"]  # abandoned an hour ago
    assert app.held["live-r1"].dropped and await app.registry.get("live-r1") is None
    clock.move(1800)
    assert await app.namespaces.drop_due() == ["live"]  # switched away from an hour ago
    assert [e.namespace for e in await app.namespaces.entries()] == ["live-r2"]


async def test_namespaces_made_before_the_registry_are_found_and_recorded(clock: Clock) -> None:
    async def databases() -> list[str]:
        return ["memlog_live", "memlog_live-r20250101000000", "memlog_other-r20250101000000", "memlog_privacy", "x"]

    app = App(clock)
    settings = Settings(namespace="live")
    namespaces = Namespaces(settings, app.pointer, app.registry, app.open, databases, clock=clock)
    await app.pointer.switch("live-r20260101000000")
    assert await namespaces.adopt_found() == ["live", "live-r20250101000000"]
    assert await namespaces.adopt_found() == []
    found = await app.registry.get("live")
    assert found is not None and found.state == PREVIOUS and found.retired_at == clock.now
    assert await namespaces.drop_due() == []
    clock.move(dt.timedelta(days=1).total_seconds())
    assert sorted(await namespaces.drop_due()) == ["live", "live-r20250101000000"]


async def test_a_worker_not_allowed_to_list_databases_starts_all_the_same(clock: Clock) -> None:
    async def refused() -> list[str]:
        raise StoreRefused("mongodb refused the write: not authorized to execute listDatabases")

    app = App(clock)
    namespaces = Namespaces(Settings(namespace="live"), app.pointer, app.registry, app.open, refused, clock=clock)
    assert await namespaces.adopt_found() == []
