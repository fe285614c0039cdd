"""List cursors (runs, the ledger): a page's last key, bound to the list and its filters."""

from __future__ import annotations

import datetime as dt

import pytest

from projections.cursors import Cursors
from projections.paging import ledger_cursor, ledger_key, list_binding, run_cursor, run_key
from schemas.errors import InvalidEvent

CURSORS = Cursors(b"k" * 32)


def test_a_cursor_carries_its_key_and_only_for_the_list_and_filters_it_was_issued_for() -> None:
    bound = list_binding("runs", "castle", "allay", None, None, None)
    assert run_key(CURSORS, run_cursor(CURSORS, bound, 1_795_000_000_000, "r-7"), bound) == (1_795_000_000_000, "r-7")
    other = list_binding("runs", "castle", "bee", None, None, None)
    with pytest.raises(InvalidEvent) as refused:
        run_key(CURSORS, run_cursor(CURSORS, bound, 1, "r"), other)
    assert refused.value.field == "cursor"
    at = dt.datetime(2026, 11, 30, 18, 0, 0, 123000, tzinfo=dt.UTC)
    ledger = list_binding("ledger", "castle", None)
    assert ledger_key(CURSORS, ledger_cursor(CURSORS, ledger, at, "req-1"), ledger) == (at, "req-1")
    for wrong in ("garbage", run_cursor(CURSORS, ledger, 1, "r"), CURSORS.seal(ledger, {"s": 0, "p": ["x", "y"]})):
        with pytest.raises(InvalidEvent):
            ledger_key(CURSORS, wrong, ledger)
