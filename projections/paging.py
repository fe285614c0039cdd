"""Keyset cursors for the lists read newest first (runs, the ledger): a cursor holds the key of a
page's last item, bound to the list and its filters, so the next page starts right after it whatever
was added meanwhile (newer items go before the first page, never into a later one)."""

from __future__ import annotations

import datetime as dt

from projections.archives import binding, decode_cursor, encode_cursor
from projections.cursors import Cursors, refuse, text, whole


def list_binding(*parts: object) -> str:
    """What a list cursor is bound to: the list's name and its filters."""
    return binding("list", *parts)


def run_cursor(cursors: Cursors, bound: str, started_at: int, run_id: str) -> str:
    return encode_cursor(cursors, bound, 0, [started_at, run_id])


def run_key(cursors: Cursors, cursor: str, bound: str) -> tuple[int, str]:
    """(started_at, run_id) a runs cursor continues after; InvalidEvent('cursor') for any other cursor."""
    _, key = decode_cursor(cursors, cursor, bound, 2)
    return whole(key[0]), text(key[1])


def ledger_cursor(cursors: Cursors, bound: str, at: dt.datetime, entry_id: str) -> str:
    return encode_cursor(cursors, bound, 0, [at.isoformat(), entry_id])


def ledger_key(cursors: Cursors, cursor: str, bound: str) -> tuple[dt.datetime, str]:
    """(at, id) a ledger cursor continues after; InvalidEvent('cursor') for any other cursor."""
    _, key = decode_cursor(cursors, cursor, bound, 2)
    try:
        at = dt.datetime.fromisoformat(text(key[0]))
    except ValueError:
        refuse()
    if at.tzinfo is None:
        refuse()
    return at, text(key[1])
