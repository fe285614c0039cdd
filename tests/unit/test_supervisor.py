"""`memlog up`'s supervision: a child that fails starts again after a delay that doubles to a bound."""

from __future__ import annotations

import os
import sys

from memlog.dev.supervisor import MAX_DELAY_SECONDS, STEADY_SECONDS, Supervised


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def child(code: int) -> list[str]:
    return [sys.executable, "-c", f"raise SystemExit({code})"]


def run_out(supervised: Supervised) -> None:
    assert supervised.process is not None
    supervised.process.wait()


def test_a_failing_child_starts_again_after_delays_that_double_up_to_the_bound() -> None:
    lines: list[str] = []
    clock = Clock()
    supervised = Supervised("worker", child(75), dict(os.environ), say=lines.append, clock=clock)
    supervised.start()
    delays = []
    pids = set()
    for _ in range(8):
        assert supervised.process is not None
        pids.add(supervised.process.pid)
        run_out(supervised)
        assert supervised.keep()
        delays.append(float(lines[-1].split("restarting it in ")[1].split("s")[0]))
        clock.now += delays[-1] - 0.01
        assert supervised.keep() and lines[-1].startswith("memlog: the worker exited")  # not yet
        clock.now += 0.01
        assert supervised.keep()
        assert lines[-1].startswith("memlog: the worker runs (pid ")
    assert delays == [1, 2, 4, 8, 16, MAX_DELAY_SECONDS, MAX_DELAY_SECONDS, MAX_DELAY_SECONDS]
    assert len(pids) == 8 and supervised.restarts == 8
    assert "memlog: the worker exited with 75; restarting it in 1s (restart 1)" in lines
    run_out(supervised)


def test_a_child_that_ran_steadily_before_failing_starts_again_after_the_first_delay() -> None:
    lines: list[str] = []
    clock = Clock()
    supervised = Supervised("worker", child(1), dict(os.environ), say=lines.append, clock=clock)
    supervised.start()
    for _ in range(3):
        run_out(supervised)
        supervised.keep()
        clock.now += MAX_DELAY_SECONDS
        supervised.keep()
    clock.now += STEADY_SECONDS
    run_out(supervised)
    supervised.keep()
    assert "restarting it in 1s (restart 4)" in lines[-1]
    clock.now += 1
    supervised.keep()
    run_out(supervised)


def test_a_child_that_exits_with_0_was_stopped_on_purpose_and_stays_stopped() -> None:
    supervised = Supervised("worker", child(0), dict(os.environ), say=lambda _: None, clock=Clock())
    supervised.start()
    run_out(supervised)
    assert not supervised.keep()
    assert supervised.restarts == 0
