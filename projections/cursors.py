"""Cursors a client hands back but cannot make.

A cursor is `<payload>.<tag>`: the payload is base64url JSON of where the next page starts, the tag an
HMAC-SHA256, under a key only the servers hold, of what the cursor is bound to (the route, the tenant,
the query and its filters) and of the payload. The tag is checked before anything else is read, so no
payload a client made or changed reaches the code that decodes a cursor, and a cursor issued for another
route, tenant or filter fails as a tampered one does. What a signed payload holds is still read strictly
(`whole`, `text`, `items`): a key that leaked must cost a 422, never a 500.

The key is derived from the master key (`Cursors.derived`), so every API replica and the CLI read each
other's cursors with no setting of their own, and a new master key ends every cursor in circulation.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
from dataclasses import dataclass, field
from typing import Any, NoReturn

from schemas.errors import InvalidEvent

# Longer than any cursor memlog issues: a search's snapshot marks one offset per partition it read.
MAX_CURSOR_CHARS = 32_768
INT64 = 2**63
_PURPOSE = b"memlog cursor signing key v1"  # the master key itself never signs anything
REFUSED = "is not a cursor memlog issued for this route, tenant, query and filters; start without it"


def refuse() -> NoReturn:
    raise InvalidEvent("cursor", REFUSED)


@dataclass(frozen=True)
class Cursors:
    """Seal and open cursors under one key (32 bytes of HMAC-SHA256)."""

    key: bytes = field(repr=False)

    @classmethod
    def derived(cls, master_key: bytes) -> Cursors:
        return cls(hmac.new(master_key, _PURPOSE, hashlib.sha256).digest())

    def seal(self, bound: str, payload: object) -> str:
        """The cursor of `payload` (JSON: finite numbers, strings, lists, objects) for the binding `bound`."""
        return self.sign(bound, json.dumps(payload, separators=(",", ":"), ensure_ascii=True, allow_nan=False))

    def sign(self, bound: str, text: str) -> str:
        """The cursor of a JSON text, as it is: what `seal` sends, and what a test of the readers forges."""
        body = base64.urlsafe_b64encode(text.encode()).rstrip(b"=")
        return f"{body.decode()}.{self._tag(bound, body)}"

    def open(self, cursor: str, bound: str) -> Any:
        """The payload sealed for `bound`; InvalidEvent('cursor') for anything else, before decoding it."""
        if len(cursor) > MAX_CURSOR_CHARS or not cursor.isascii():
            refuse()
        body, dot, tag = cursor.partition(".")
        if not dot or not hmac.compare_digest(self._tag(bound, body.encode()).encode(), tag.encode()):
            refuse()
        try:
            return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)), parse_constant=_constant)
        except (ValueError, binascii.Error, RecursionError):  # only if the key leaked: nothing memlog seals
            refuse()

    def _tag(self, bound: str, body: bytes) -> str:
        binding = bound.encode()
        message = b"%d:" % len(binding) + binding + body  # length-prefixed: no binding ends where a body starts
        return base64.urlsafe_b64encode(hmac.new(self.key, message, hashlib.sha256).digest()).rstrip(b"=").decode()


def _constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def whole(value: Any) -> int:
    """An int64 of a cursor's payload (never a bool, a float or a number past int64)."""
    if isinstance(value, bool) or not isinstance(value, int) or not -INT64 <= value < INT64:
        refuse()
    return value


def number(value: Any) -> float:
    """A finite number of a cursor's payload."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        refuse()
    if isinstance(value, int):
        whole(value)
    elif not math.isfinite(value):
        refuse()
    return float(value)


def text(value: Any) -> str:
    if not isinstance(value, str):
        refuse()
    return value


def items(value: Any, count: int | None = None) -> list[Any]:
    """A list of a cursor's payload, of `count` items when given."""
    if not isinstance(value, list) or (count is not None and len(value) != count):
        refuse()
    return value


def entries(value: Any) -> dict[str, Any]:
    """An object of a cursor's payload."""
    if not isinstance(value, dict):
        refuse()
    return value
