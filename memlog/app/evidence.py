"""Evidence on read (seed 004, "Evidence and completion"): the runs that served an exchange's tool calls,
joined by (thread, exchange id, call index) from the traces, and each call's status. The rules are in
projections/evidence.py; the link lives in the trace a RunTraced projects, so a replay rebuilds it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic_core import from_json, to_json

from projections.archives import thread_ref
from projections.evidence import CallKey, latest_runs, link_entry, with_evidence
from projections.ports import TraceStore
from projections.ready import UNANSWERED, ReadyThread
from projections.traces import served_links
from schemas.events import now_ms


class Evidence:
    """Args:
    traces: the namespace's trace projection.
    tool_timeout_ms: MEMLOG_TOOL_RESULT_TIMEOUT_SECONDS, in ms: a call with no result this long reads incomplete.
    """

    def __init__(self, traces: TraceStore, tool_timeout_ms: int) -> None:
        self._traces = traces
        self._timeout_ms = tool_timeout_ms

    async def runs(self, tenant: str, thread: str, owner: str, exchange_ids: Iterable[str]) -> dict[CallKey, str]:
        wanted = sorted({e for e in exchange_ids if e})
        if not wanted:
            return {}
        return latest_runs(await self._traces.served(tenant, thread_ref(thread, owner), wanted, now_ms()))

    async def exchanges(
        self, tenant: str, thread: str, owner: str, views: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Context views of exchanges with each tool call's `status` and `run_id`, and the exchange's `run_id`."""
        runs = await self.runs(tenant, thread, owner, (str(v["exchange_id"]) for v in views))
        now = now_ms()
        return [with_evidence(view, runs, now_ms=now, timeout_ms=self._timeout_ms) for view in views]

    async def ready_exchanges(
        self, tenant: str, thread: str, owner: str, ready: ReadyThread, *, marked: bool = False
    ) -> bytes | None:
        """A ready thread's exchanges' JSON as `exchanges` makes their views, or None when it is the stored
        JSON as it is: no run names any of them, and no call is unanswered (whose status is the clock's).
        With `marked` (the namespace's served marks are complete), the runs are those the thread's mark
        links (`ready.served`, read with the thread; none without a mark); otherwise they are read from
        the traces (a run may be traced, or its trace expire, at any time)."""
        now = now_ms()
        if marked:
            wanted = set(ready.exchange_ids)
            links = served_links(ready.served or b"", now)
            runs = latest_runs(link for link in links if link["exchange_id"] in wanted)
        else:
            runs = await self.runs(tenant, thread, owner, ready.exchange_ids)
        if not runs and UNANSWERED not in ready.exchanges_json:
            return None
        views = from_json(ready.exchanges_json)
        return to_json([with_evidence(view, runs, now_ms=now, timeout_ms=self._timeout_ms) for view in views])

    async def entries(self, tenant: str, items: list[dict[str, Any]]) -> None:
        """Archive entry views (with their `neighbours`, if any), of any threads of the tenant: each tool
        entry gets the `run_id` of the run that served its call (None: none did, or its trace expired)."""
        every = [*items, *(n for item in items for n in item.get("neighbours", []))]
        by_thread: dict[str, list[dict[str, Any]]] = {}
        for entry in every:
            if entry.get("role") == "tool":
                by_thread.setdefault(str(entry["thread"]), []).append(entry)
        now = now_ms()
        for ref, tools in by_thread.items():
            ids = sorted({str(e["exchange_id"]) for e in tools if e.get("exchange_id")})
            runs = latest_runs(await self._traces.served(tenant, ref, ids, now)) if ids else {}
            for entry in tools:
                link_entry(entry, runs)


def without_evidence(exchanges_json: bytes) -> bytes:
    """Ready views as a read with no evidence serves them: every call `ok` with no run (the defaults)."""
    views = from_json(exchanges_json)
    for view in views:
        view["tool_calls"] = [{**call, "status": "ok", "run_id": None} for call in view["tool_calls"]]
        view["run_id"] = None
    return to_json(views)
