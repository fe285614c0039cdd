"""Keyset cursors for the lists read newest first (runs, the ledger): a cursor holds the key of a
page's last item, bound to the list and its filters, so the next page starts right after it whatever
was added meanwhile (newer items go before the first page, never into a later one)."""

from __future__ import annotations

import datetime as dt

from projections.archives import binding, decode_cursor, encode_cursor
from schemas.errors import InvalidEvent


def list_binding(*parts: object) -> str:
    """What a list cursor is bound to: the list's name and its filters."""
    return binding("list", *parts)


def run_cursor(bound: str, started_at: int, run_id: str) -> str:
    return encode_cursor(bound, 0, [started_at, run_id])


def run_key(cursor: str, bound: str) -> tuple[int, str]:
    """(started_at, run_id) a runs cursor continues after; InvalidEvent('cursor') for any other cursor."""
    _, key = decode_cursor(cursor, bound)
    if len(key) != 2 or not isinstance(key[0], int) or isinstance(key[0], bool) or not isinstance(key[1], str):
        raise InvalidEvent("cursor", "is not a cursor of this list")
    return key[0], key[1]


def ledger_cursor(bound: str, at: dt.datetime, entry_id: str) -> str:
    return encode_cursor(bound, 0, [at.isoformat(), entry_id])


def ledger_key(cursor: str, bound: str) -> tuple[dt.datetime, str]:
    """(at, id) a ledger cursor continues after; InvalidEvent('cursor') for any other cursor."""
    _, key = decode_cursor(cursor, bound)
    try:
        at = dt.datetime.fromisoformat(key[0])
        entry_id = key[1]
    except (IndexError, TypeError, ValueError):
        raise InvalidEvent("cursor", "is not a cursor of this list") from None
    if len(key) != 2 or not isinstance(entry_id, str) or at.tzinfo is None:
        raise InvalidEvent("cursor", "is not a cursor of this list")
    return at, entry_id
