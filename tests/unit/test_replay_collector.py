"""The cyclic collector while rebuilds run in one process (replays started through the API share its
process and may overlap): off from the first to start, a full collection every so many events applied,
and back as it was when the last ends."""

from __future__ import annotations

import gc

import pytest

from streams.rebuild import COLLECT_EVERY_EVENTS, COLLECTOR


@pytest.fixture
def collector_restored() -> object:
    was = gc.isenabled()
    yield None
    if was:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.usefixtures("collector_restored")
def test_overlapping_rebuilds_turn_the_collector_back_on_when_the_last_ends() -> None:
    gc.enable()
    COLLECTOR.enter()  # replay A
    COLLECTOR.enter()  # replay B, while A runs
    assert not gc.isenabled()
    COLLECTOR.leave()  # A ends first: B still runs
    assert not gc.isenabled()
    COLLECTOR.leave()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_restored")
def test_a_process_that_had_its_collector_off_keeps_it_off() -> None:
    gc.disable()
    COLLECTOR.enter()
    COLLECTOR.leave()
    assert not gc.isenabled()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.mark.usefixtures("collector_restored")
def test_cycles_made_while_the_collector_is_off_are_collected_once_enough_events_are_applied() -> None:
    gc.enable()
    gc.collect()
    COLLECTOR.enter()
    try:
        _Cycle()  # unreachable at once, and only the cyclic collector frees it
        COLLECTOR.applied(COLLECT_EVERY_EVENTS - 1)
        assert any(isinstance(held, _Cycle) for held in gc.get_objects())
        COLLECTOR.applied(1)
        assert not any(isinstance(held, _Cycle) for held in gc.get_objects())
    finally:
        COLLECTOR.leave()
