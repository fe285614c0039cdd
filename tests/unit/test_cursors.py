"""Signed cursors (projections/cursors.py): only what a server sealed for the same binding opens."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.cursors import MAX_CURSOR_CHARS, Cursors, number, whole
from schemas.errors import InvalidEvent

CURSORS = Cursors.derived(b"m" * 32)
PAYLOAD = {"s": 41, "p": [0, -2, -5, "threads:0:5"]}


def refused(cursor: str, bound: str = "b", cursors: Cursors = CURSORS) -> bool:
    try:
        cursors.open(cursor, bound)
    except InvalidEvent as exc:
        assert exc.field == "cursor"
        return True
    return False


def test_a_sealed_cursor_opens_for_its_binding_only() -> None:
    cursor = CURSORS.seal("b", PAYLOAD)
    assert CURSORS.open(cursor, "b") == PAYLOAD
    assert refused(cursor, "c")
    assert refused(cursor, cursors=Cursors.derived(b"n" * 32))  # another master key
    assert Cursors.derived(b"m" * 32).open(cursor, "b") == PAYLOAD  # another replica, the same master key


def test_every_changed_truncated_or_unsigned_cursor_is_refused() -> None:
    cursor = CURSORS.seal("b", PAYLOAD)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for at, char in enumerate(cursor):
        if char != ".":
            assert refused(cursor[:at] + alphabet[(alphabet.index(char) + 1) % 64] + cursor[at + 1 :])
    for end in range(len(cursor)):
        assert refused(cursor[:end])
    body = cursor.split(".")[0]
    for unsigned in (body, body + ".", "." + cursor.split(".")[1], cursor + ".", cursor + "x", "é" + cursor):
        assert refused(unsigned)
    assert refused(cursor + "A" * MAX_CURSOR_CHARS)


def test_a_payload_made_elsewhere_is_refused_before_it_is_decoded() -> None:
    deep = base64.urlsafe_b64encode(b"[" * 5000 + b"]" * 5000).decode()
    assert refused(f"{deep}.{CURSORS.seal('b', 0).split('.')[1]}")


def test_signed_values_are_read_strictly() -> None:
    assert whole(2**63 - 1) == 2**63 - 1 and number(0.25) == 0.25
    for bad in (2**63, -(2**63) - 1, 2**70, True, 1.0, "1", None, [1]):
        with pytest.raises(InvalidEvent):
            whole(bad)
    for bad in (float("inf"), float("nan"), 2**70, False, "0.5"):
        with pytest.raises(InvalidEvent):
            number(bad)


@given(st.text(max_size=300))
def test_any_text_either_opens_or_is_refused_with_cursor(text: str) -> None:
    refused(text)
