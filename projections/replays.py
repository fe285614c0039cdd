"""Replays started through the API: what their stored record says to an operator.

A running replay's process writes its record (progress and `heartbeat_ms`) at least every
HEARTBEAT_SECONDS. A record still `running` whose heartbeat is older than STALE_SECONDS belongs to a
process that ended mid-replay (the API restarted): it is shown `interrupted`, and no longer holds off
another replay.
"""

from __future__ import annotations

from typing import Any

HEARTBEAT_SECONDS = 5.0
STALE_SECONDS = 60.0


def alive(record: dict[str, Any], now_ms: int) -> bool:
    """A replay still running in some process."""
    heartbeat = record.get("heartbeat_ms")
    fresh = isinstance(heartbeat, int) and now_ms - heartbeat <= STALE_SECONDS * 1000
    return record.get("state") == "running" and fresh


def shown(record: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """The record as the status route answers it."""
    view = {k: v for k, v in record.items() if k != "heartbeat_ms"}
    if record.get("state") == "running" and not alive(record, now_ms):
        view["state"] = "interrupted"
        view["error"] = "the process running it ended before it finished; start it again"
    return view
