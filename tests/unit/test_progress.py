"""The progress clock: a lag is a stall only once it has stood unmoved for the bound."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.progress import ProgressClock, Reading, stalled, working


def reading(applied: int, end: int = 10, projection: str = "archive", partition: int = 0) -> Reading:
    return Reading.at(projection, "threads", partition, applied, end)


def test_a_lag_that_stands_unmoved_is_a_stall_once_the_bound_has_passed() -> None:
    clock = ProgressClock()
    assert clock.observe([reading(4)], now=100.0)[0].idle_seconds == 0.0
    assert stalled(clock.observe([reading(4)], now=129.0), 30.0) == []
    [stall] = stalled(clock.observe([reading(4, end=12)], now=130.0), 30.0)
    assert stall.reading.lag == 7 and stall.idle_seconds == 30.0
    assert stall.describe() == "archive/threads.0 lag 7, idle 30s"


def test_a_checkpoint_that_moves_restarts_the_clock() -> None:
    clock = ProgressClock()
    clock.observe([reading(4)], now=0.0)
    [behind] = clock.observe([reading(5)], now=50.0)
    assert behind.idle_seconds == 0.0
    assert clock.observe([reading(5)], now=60.0)[0].idle_seconds == 10.0


def test_the_clock_starts_when_the_lag_appears_not_at_the_last_reading_without_one() -> None:
    clock = ProgressClock()
    assert clock.observe([reading(9)], now=0.0) == []  # caught up
    assert clock.observe([reading(9, end=11)], now=100.0)[0].idle_seconds == 0.0


def test_a_partition_left_out_of_a_round_and_a_forgotten_clock_start_afresh() -> None:
    clock = ProgressClock()
    clock.observe([reading(4), reading(4, partition=1)], now=0.0)
    clock.observe([reading(4)], now=10.0)  # partition 1 revoked
    idle = {b.reading.partition: b.idle_seconds for b in clock.observe([reading(4), reading(4, partition=1)], 20.0)}
    assert idle == {0: 20.0, 1: 0.0}
    clock.forget()
    assert clock.observe([reading(4)], now=30.0)[0].idle_seconds == 0.0


@given(st.lists(st.tuples(st.integers(-1, 20), st.floats(0, 100)), min_size=1, max_size=30))
def test_idle_time_never_exceeds_the_time_since_the_checkpoint_was_first_seen_where_it_stands(
    rounds: list[tuple[int, float]],
) -> None:
    clock = ProgressClock()
    now = 0.0
    first_seen: dict[int, float] = {}
    previous: int | None = None
    for applied, step in rounds:
        now += step
        if applied != previous:
            first_seen = {applied: now}
        previous = applied
        for behind in clock.observe([reading(applied, end=22)], now):
            assert behind.idle_seconds == now - first_seen[applied]


def test_a_batch_in_progress_counts_as_progress_up_to_its_bound() -> None:
    """Issue 41: one costly record keeps its projection inside a batch; that is work, not a stall."""
    clock = ProgressClock()
    clock.observe([reading(4), reading(4, projection="sessions")], now=0.0)
    behind = clock.observe([reading(4), reading(4, projection="sessions")], now=40.0)
    busy = working({"archive": 5.0, "sessions": None}, now=40.0, batch_seconds=300.0)
    assert busy == {"archive"}
    assert [b.reading.projection for b in stalled(behind, 30.0, busy)] == ["sessions"]
    late = working({"archive": 5.0, "sessions": None}, now=305.0, batch_seconds=300.0)
    assert late == set()  # a batch that outlasts the bound is stuck
    assert len(stalled(clock.observe([reading(4), reading(4, projection="sessions")], now=305.0), 30.0, late)) == 2
