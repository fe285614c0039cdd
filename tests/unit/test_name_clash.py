"""A worker whose static name another running worker has: it starts again as a dynamic member."""

from __future__ import annotations

import inspect
import logging

from aiokafka.consumer import group_coordinator

from streams.name_clash import COORDINATOR_LOGGER, LIMIT, UNKNOWN_MEMBER, WINDOW_SECONDS, NameClash


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_line_it_reads_is_the_one_aiokafka_writes_before_joining_again() -> None:
    assert group_coordinator.log.name == COORDINATOR_LOGGER
    assert UNKNOWN_MEMBER in inspect.getsource(group_coordinator)


def test_member_ids_lost_as_often_as_two_workers_under_one_name_lose_them_restart_it() -> None:
    clock, restarts = Clock(), []
    clash = NameClash("w-0", lambda: restarts.append("restart"), clock=clock)
    clash.watch()
    coordinator = logging.getLogger(COORDINATOR_LOGGER)
    try:
        for _ in range(LIMIT - 1):
            coordinator.warning("Heartbeat failed: %s; resetting and re-joining group", UNKNOWN_MEMBER)
            coordinator.warning("Heartbeat failed for group g because it is rebalancing")  # not counted
            clock.now += 6.0  # two heartbeats apart: the two workers take turns
        assert restarts == []
        coordinator.warning("Heartbeat failed: %s; resetting and re-joining group", UNKNOWN_MEMBER)
        assert restarts == ["restart"]
    finally:
        coordinator.removeHandler(clash)


def test_member_ids_lost_further_apart_than_the_window_allows_never_do() -> None:
    clock = Clock()
    clash = NameClash("w-0", lambda: None, clock=clock)
    for _ in range(10 * LIMIT):
        assert not clash.lost()
        clock.now += WINDOW_SECONDS / (LIMIT - 1) + 0.01


def test_a_burst_long_ago_does_not_count_toward_one_now() -> None:
    clock = Clock()
    clash = NameClash("w-0", lambda: None, clock=clock)
    for _ in range(LIMIT - 1):
        assert not clash.lost()
    clock.now += WINDOW_SECONDS + 1
    for _ in range(LIMIT - 1):
        assert not clash.lost()
    assert clash.lost()
