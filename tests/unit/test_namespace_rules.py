"""Which namespaces may be dropped, and when (projections.namespaces)."""

from __future__ import annotations

import datetime as dt

import pytest

from projections.namespaces import (
    ABANDONED,
    ACTIVE,
    BUILDING,
    PREVIOUS,
    STALE_SECONDS,
    NamespaceEntry,
    drop_after,
    due_for_drop,
    valid_name,
    why_not_drop,
)

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


def entry(
    namespace: str, state: str, *, retired: dt.datetime | None = None, seen: dt.datetime | None = None
) -> NamespaceEntry:
    return NamespaceEntry(namespace, state, T0, retired or seen or T0, retired, seen)


def test_the_active_namespace_is_never_dropped_whatever_the_registry_says() -> None:
    old = entry("live", PREVIOUS, retired=T0)
    assert why_not_drop(old, "live", T0 + 10 * DAY) == "live is the active namespace: reads and workers use it"
    assert not due_for_drop(old, "live", T0 + 10 * DAY, DAY)
    assert not due_for_drop(entry("live", ACTIVE), "other", T0 + 10 * DAY, DAY)
    assert drop_after(entry("live", ACTIVE), DAY) is None


@pytest.mark.parametrize("state", [PREVIOUS, ABANDONED])
def test_a_namespace_out_of_use_goes_once_the_grace_period_has_passed(state: str) -> None:
    old = entry("live-r1", state, retired=T0)
    assert drop_after(old, DAY) == T0 + DAY
    assert not due_for_drop(old, "live", T0 + DAY - dt.timedelta(seconds=1), DAY)
    assert due_for_drop(old, "live", T0 + DAY, DAY)
    assert why_not_drop(old, "live", T0) is None  # an operator need not wait


def test_a_namespace_a_replay_is_building_stays_while_the_replay_is_heard_of() -> None:
    building = entry("live-r1", BUILDING, seen=T0)
    stale = dt.timedelta(seconds=STALE_SECONDS)
    refused = why_not_drop(building, "live", T0 + dt.timedelta(seconds=5))
    assert refused is not None and "a replay is building live-r1" in refused
    assert not due_for_drop(building, "live", T0 + stale - dt.timedelta(seconds=1), dt.timedelta(0))  # grace 0
    assert why_not_drop(building, "live", T0 + stale) is None  # its replay died: an operator may drop it
    assert due_for_drop(building, "live", T0 + stale, dt.timedelta(0))
    assert not due_for_drop(building, "live", T0 + stale, DAY)
    assert due_for_drop(building, "live", T0 + DAY, DAY)


@pytest.mark.parametrize("name", ["live", "live-r20260101120000", "t0123456789-r20260101120000", "a_b"])
def test_names_a_namespace_may_have(name: str) -> None:
    assert valid_name(name)


@pytest.mark.parametrize("name", ["", "a:b", "a*", "a?", "[ab]", "a.b", "a b", "a/b", "x" * 49, "é"])
def test_names_that_would_reach_other_keys_or_databases(name: str) -> None:
    assert not valid_name(name)
