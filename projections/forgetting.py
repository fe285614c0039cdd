"""Forgetting reaches the transcript (seed 003: deleting a memory stops it influencing any later turn).

A `remember` call recorded in an exchange carries the fact's text in its arguments. When the fact is
deleted, the session's copy of that call is recorded again with the text replaced by a marker, so the
next prompt no longer holds it. The archive keeps the original until a purge or an erasure: the
re-recorded call is marked (`forgotten: true` in its arguments, which the remember tool itself refuses as
an argument) and the archive skips it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the archive's rules import this module, and the session's import the archive's
    from projections.session import Session

FORGOTTEN_MARK = "[forgotten]"


@dataclass(frozen=True)
class ForgottenCall:
    """A remember call to record again with the fact's text replaced."""

    exchange_id: str
    call_index: int
    arguments: str
    result: str
    ok: bool
    duration_ms: int | None


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def is_forgotten_call(name: str, arguments: str) -> bool:
    """A remember call re-recorded after its fact was forgotten (the archive keeps the original)."""
    if name != "remember" or '"forgotten"' not in arguments:
        return False
    body = _json_object(arguments)
    return body is not None and body.get("forgotten") is True


def forgotten_calls(session: Session | None, fact_ids: set[str] | None) -> list[ForgottenCall]:
    """The session's remember calls that saved one of `fact_ids` (None: every fact), text replaced."""
    if session is None:
        return []
    found: list[ForgottenCall] = []
    for exchange in session.exchanges:
        for call in exchange.tool_calls:
            if call.name != "remember" or is_forgotten_call(call.name, call.arguments):
                continue
            result, arguments = _json_object(call.result), _json_object(call.arguments)
            if result is None or arguments is None or not isinstance(result.get("fact_id"), str):
                continue
            if fact_ids is not None and result["fact_id"] not in fact_ids:
                continue
            marked = {**arguments, "text": FORGOTTEN_MARK, "forgotten": True}
            found.append(
                ForgottenCall(
                    exchange.exchange_id,
                    call.call_index,
                    json.dumps(marked, ensure_ascii=False),
                    call.result,
                    call.ok,
                    call.duration_ms,
                )
            )
    return found
