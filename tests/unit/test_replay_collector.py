"""The cyclic collector's thresholds while rebuilds run in one process (replays started through the API
share its process and may overlap): set by the first to start, put back by the last to end."""

from __future__ import annotations

import gc

from streams.rebuild import COLLECTOR, REPLAY_GC_THRESHOLDS


def test_overlapping_rebuilds_put_the_processs_thresholds_back_when_the_last_ends() -> None:
    before = gc.get_threshold()
    assert before != REPLAY_GC_THRESHOLDS
    try:
        COLLECTOR.enter()  # replay A
        COLLECTOR.enter()  # replay B, while A runs
        assert gc.get_threshold() == REPLAY_GC_THRESHOLDS
        COLLECTOR.leave()  # A ends first: B still runs
        assert gc.get_threshold() == REPLAY_GC_THRESHOLDS
        COLLECTOR.leave()
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)
