"""Evidence and completion (seed 004): a tool call's status, and the run that served it. Pure: the clock
and the links are passed in.

"Archive proof combines terminal receipts, canonical tool calls/results and trace evidence, correlated by
call IDs": a run names the exchange and the call index it served (RunTraced v3); reads join them by
(thread, exchange id, call index). A call with no result yet is `pending`; past the timeout
(MEMLOG_TOOL_RESULT_TIMEOUT_SECONDS) it is `incomplete`, distinct from a call that answered (`ok`, `error`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

CallStatus = Literal["ok", "error", "pending", "incomplete"]
NO_RESULT = "null"  # the JSON text of a call sent before its result (a streamed part with no `result`)
# projections.archives: a tool entry's id is <exchange_id>.t<call_index>, and `.c` after it for a call
# archived before its result (the receipt that answers it comes later, under the id without `.c`)
TOOL_ENTRY = re.compile(r"\.t(\d+)(\.c)?$")

CallKey = tuple[str, int | None]  # (exchange id, call index); None: the run served the exchange as a whole


def answered(ok: bool, result: str) -> bool:
    """Whether a ToolCalled answers its call: a failure does, and so does any result but none."""
    return not ok or result != NO_RESULT


def call_status(*, ok: bool, has_result: bool, called_at: int, now_ms: int, timeout_ms: int) -> CallStatus:
    """`error`: the tool said it failed; `ok`: it answered; with no result yet, `pending` until `timeout_ms`
    have passed since the call, then `incomplete`."""
    if not ok:
        return "error"
    if has_result:
        return "ok"
    return "incomplete" if now_ms - called_at >= timeout_ms else "pending"


def latest_runs(links: Iterable[Mapping[str, Any]]) -> dict[CallKey, str]:
    """The run serving each (exchange, call): of several (a retried call), the one started last (ties: the
    greater run id)."""
    best: dict[CallKey, tuple[int, str]] = {}
    for link in links:
        key = (str(link["exchange_id"]), link.get("call_index"))
        candidate = (int(link.get("started_at", 0)), str(link["run_id"]))
        if key not in best or candidate > best[key]:
            best[key] = candidate
    return {key: run_id for key, (_, run_id) in best.items()}


def with_evidence(
    exchange: Mapping[str, Any], runs: Mapping[CallKey, str], *, now_ms: int, timeout_ms: int
) -> dict[str, Any]:
    """A context view of an exchange (`projections.session.Exchange.view`) with each tool call's `status`
    and `run_id` (None: no run names it), and the exchange's own `run_id` (a run naming no call)."""
    exchange_id = str(exchange["exchange_id"])
    calls = []
    for call in exchange.get("tool_calls", []):
        called_at = call.get("called_at")
        status = call_status(
            ok=bool(call["ok"]),
            has_result=call.get("result") is not None,  # the view's JSON value: None is `null`, no result
            called_at=int(exchange.get("occurred_at", 0) if called_at is None else called_at),
            now_ms=now_ms,
            timeout_ms=timeout_ms,
        )
        calls.append({**call, "status": status, "run_id": runs.get((exchange_id, call.get("call_index")))})
    return {**exchange, "tool_calls": calls, "run_id": runs.get((exchange_id, None))}


def entry_call(entry: Mapping[str, Any]) -> CallKey | None:
    """The (exchange, call) an archived tool entry records; None for any other entry."""
    if entry.get("role") != "tool" or entry.get("exchange_id") is None:
        return None
    found = TOOL_ENTRY.search(str(entry.get("entry_id", "")))
    return None if found is None else (str(entry["exchange_id"]), int(found.group(1)))


def link_entry(entry: dict[str, Any], runs: Mapping[CallKey, str]) -> dict[str, Any]:
    """An archive entry's view, a tool entry with the `run_id` that served its call (None: none did)."""
    key = entry_call(entry)
    if key is not None:
        entry["run_id"] = runs.get(key)
    return entry
