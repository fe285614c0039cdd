"""Evidence and completion (seed 004): a tool call's status, and the run that served it. Pure: the clock
and the links are passed in.

"Archive proof combines terminal receipts, canonical tool calls/results and trace evidence, correlated by
call IDs": a run names the exchange and the call index it served (RunTraced v3); reads join them by
(thread, exchange id, call index). A call with no result yet is `pending`; past the timeout
(MEMLOG_TOOL_RESULT_TIMEOUT_SECONDS) it is `incomplete`, distinct from a call that answered (`ok`, `error`).

Receipts (ReceiptRecorded) check a call, or the action the answer claims (call index None), with a typed
result; the newest per (exchange, call) counts. An answer's state (`answer_state`), made at read time so a
receipt may come after the answer:
- `incomplete` when one of its calls never answered (`incomplete` above);
- `verified` when every call it relies on (its tool calls, and the claimed action once a receipt names
  it) has a receipt that vouches for it (`passed`, or `failed_expected`: a failure the check expected);
- `unverified` otherwise: some call has no receipt, or one that `failed` or was `not_run`;
- None while there is no answer yet, or when the answer relies on nothing (no call, no claimed action).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

CallStatus = Literal["ok", "error", "pending", "incomplete"]
AnswerState = Literal["verified", "unverified", "incomplete"]
VOUCHING = frozenset({"passed", "failed_expected"})  # receipt results that vouch for their call
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


def latest_receipts(links: Iterable[Mapping[str, Any]]) -> dict[CallKey, str]:
    """The result of each (exchange, call)'s newest receipt: recorded last (ties: the later offset on the
    log). Links of runs (no `receipt`) are passed over."""
    best: dict[CallKey, tuple[int, int, str]] = {}
    for link in links:
        if "receipt" not in link:
            continue
        key = (str(link["exchange_id"]), link.get("call_index"))
        candidate = (int(link.get("recorded_at", 0)), int(link.get("offset", 0)), str(link["receipt"]))
        if key not in best or candidate > best[key]:
            best[key] = candidate
    return {key: result for key, (_, _, result) in best.items()}


def answer_state(
    statuses: Iterable[CallStatus], receipts: Iterable[str | None], action: str | None, *, answered: bool = True
) -> AnswerState | None:
    """The rule above: `statuses` and `receipts` of the exchange's calls (a receipt None: none yet),
    `action` the claimed action's receipt, `answered` whether the answer has been given."""
    if "incomplete" in statuses:
        return "incomplete"
    relied = [*receipts, *([] if action is None else [action])]
    if not answered or not relied:
        return None
    return "verified" if all(result in VOUCHING for result in relied) else "unverified"


def with_evidence(
    exchange: Mapping[str, Any],
    runs: Mapping[CallKey, str],
    *,
    now_ms: int,
    timeout_ms: int,
    receipts: Mapping[CallKey, str] | None = None,
) -> dict[str, Any]:
    """A context view of an exchange (`projections.session.Exchange.view`) with each tool call's `status`,
    `run_id` (None: no run names it) and `receipt` (its newest receipt's result, None: none), and the
    exchange's own `run_id` (a run naming no call), `receipt` (of its claimed action) and `answer_state`."""
    exchange_id = str(exchange["exchange_id"])
    receipts = receipts or {}
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
        key = (exchange_id, call.get("call_index"))
        calls.append({**call, "status": status, "run_id": runs.get(key), "receipt": receipts.get(key)})
    action = receipts.get((exchange_id, None))
    state = answer_state(
        (c["status"] for c in calls),
        [c["receipt"] for c in calls],
        action,
        answered=exchange.get("answer") is not None,
    )
    return {
        **exchange,
        "tool_calls": calls,
        "run_id": runs.get((exchange_id, None)),
        "receipt": action,
        "answer_state": state,
    }


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


@dataclass
class ArchivedExchange:
    """What the archive shows of an exchange: its calls (index: None once answered, else when the call
    was made), and whether its answer is there."""

    calls: dict[int, int | None] = field(default_factory=dict)
    answered: bool = False


def archived_exchanges(entries: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], ArchivedExchange]:
    """Archived entries' views, by (thread, exchange id): a tool entry `<id>.t<n>` answers call n; one
    `<id>.t<n>.c` is the call made before its result (unanswered while no `<id>.t<n>` is found)."""
    found: dict[tuple[str, str], ArchivedExchange] = {}
    for entry in entries:
        if entry.get("exchange_id") is None:
            continue
        seen = found.setdefault((str(entry["thread"]), str(entry["exchange_id"])), ArchivedExchange())
        if entry.get("role") == "answer":
            seen.answered = True
        match = TOOL_ENTRY.search(str(entry.get("entry_id", ""))) if entry.get("role") == "tool" else None
        if match is None:
            continue
        index = int(match.group(1))
        if match.group(2) is None:
            seen.calls[index] = None
        elif index not in seen.calls:
            seen.calls[index] = int(entry.get("occurred_at") or 0)
    return found


def archived_evidence(
    entry: dict[str, Any],
    exchange: ArchivedExchange,
    receipts: Mapping[CallKey, str],
    *,
    now_ms: int,
    timeout_ms: int,
) -> dict[str, Any]:
    """An archived entry of an exchange with the exchange's `answer_state` (the rule above, over the calls
    the archive holds), and its `receipt`: a tool entry's call's, an answer's claimed action's."""
    exchange_id = str(entry["exchange_id"])
    statuses: list[CallStatus] = [
        "ok"
        if called is None
        else call_status(ok=True, has_result=False, called_at=called, now_ms=now_ms, timeout_ms=timeout_ms)
        for called in exchange.calls.values()
    ]
    state = answer_state(
        statuses,
        [receipts.get((exchange_id, index)) for index in exchange.calls],
        receipts.get((exchange_id, None)),
        answered=exchange.answered,
    )
    key = entry_call(entry)
    if key is not None:
        entry["receipt"] = receipts.get(key)
    elif entry.get("role") == "answer":
        entry["receipt"] = receipts.get((exchange_id, None))
    entry["answer_state"] = state
    return entry
