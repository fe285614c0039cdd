"""Evidence on read (seed 004, "Evidence and completion"): the runs that served an exchange's tool calls,
joined by (thread, exchange id, call index) from the traces, each call's status, the receipts that check
the calls (or the answer's claimed action), and the answer's state. The rules are in
projections/evidence.py; links live in the traces and receipts the trace projection stores (and in each
thread's served mark), so a replay rebuilds them, and a receipt recorded after its answer shows at the
next read."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic_core import from_json, to_json

from projections.archives import NEVER, ConversationRef, Entry, parse_thread, thread_ref
from projections.evidence import (
    CallKey,
    archived_evidence,
    archived_exchanges,
    latest_receipts,
    latest_runs,
    link_entry,
    with_evidence,
)
from projections.ports import ConversationArchive, TraceStore
from projections.ready import UNANSWERED, ReadyThread
from projections.receipts import ReceiptStore
from projections.traces import served_links
from schemas.errors import InvalidEvent
from schemas.events import PUBLIC_THREAD, now_ms

# An archived exchange's entries are read this far either side of those a read returns (its calls)
EXCHANGE_RADIUS = 24

Links = tuple[dict[CallKey, str], dict[CallKey, str]]  # runs, receipts


class Evidence:
    """Args:
    traces: the namespace's trace projection.
    tool_timeout_ms: MEMLOG_TOOL_RESULT_TIMEOUT_SECONDS, in ms: a call with no result this long reads incomplete.
    receipts: the namespace's receipts; None: no receipt is joined.
    archive: the namespace's conversations, where archived entries find their exchange's other calls.
    """

    def __init__(
        self,
        traces: TraceStore,
        tool_timeout_ms: int,
        receipts: ReceiptStore | None = None,
        archive: ConversationArchive | None = None,
    ) -> None:
        self._traces = traces
        self._timeout_ms = tool_timeout_ms
        self._receipts = receipts
        self._archive = archive

    async def links(self, tenant: str, ref: str, exchange_ids: Iterable[str]) -> Links:
        """The runs and receipts of these exchanges of the thread `ref`, read from their stores."""
        wanted = sorted({e for e in exchange_ids if e})
        if not wanted:
            return {}, {}
        now = now_ms()
        runs = latest_runs(await self._traces.served(tenant, ref, wanted, now))
        checked = [] if self._receipts is None else await self._receipts.served(tenant, ref, wanted, now)
        return runs, latest_receipts(checked)

    async def runs(self, tenant: str, thread: str, owner: str, exchange_ids: Iterable[str]) -> dict[CallKey, str]:
        return (await self.links(tenant, thread_ref(thread, owner), exchange_ids))[0]

    async def exchanges(
        self, tenant: str, thread: str, owner: str, views: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Context views of exchanges with each tool call's `status`, `run_id` and `receipt`, and the
        exchange's `run_id`, `receipt` and `answer_state`."""
        ids = (str(v["exchange_id"]) for v in views)
        runs, receipts = await self.links(tenant, thread_ref(thread, owner), ids)
        now = now_ms()
        return [with_evidence(view, runs, now_ms=now, timeout_ms=self._timeout_ms, receipts=receipts) for view in views]

    async def ready_exchanges(
        self, tenant: str, thread: str, owner: str, ready: ReadyThread, *, marked: bool = False
    ) -> bytes | None:
        """A ready thread's exchanges' JSON as `exchanges` makes their views, or None when it is the stored
        JSON as it is: no run or receipt names any of them, and no call is unanswered (whose status is
        the clock's). With `marked` (the namespace's served marks are complete), the runs and receipts
        are those the thread's mark links (`ready.served`, read with the thread; none without a mark);
        otherwise they are read from their stores (a run may be traced, or its trace expire, at any time)."""
        now = now_ms()
        if marked:
            wanted = set(ready.exchange_ids)
            links = [link for link in served_links(ready.served or b"", now) if link["exchange_id"] in wanted]
            runs = latest_runs(link for link in links if "run_id" in link)
            receipts = latest_receipts(links)
        else:
            runs, receipts = await self.links(tenant, thread_ref(thread, owner), ready.exchange_ids)
        if not runs and not receipts and UNANSWERED not in ready.exchanges_json:
            return None
        views = from_json(ready.exchanges_json)
        timeout = self._timeout_ms
        return to_json([with_evidence(v, runs, now_ms=now, timeout_ms=timeout, receipts=receipts) for v in views])

    async def entries(self, tenant: str, items: list[dict[str, Any]], known: Sequence[Entry] = ()) -> None:
        """Archive entry views (with their `neighbours`, if any), of any threads of the tenant: each tool
        entry gets the `run_id` of the run that served its call (None: none did, or its trace expired) and
        its call's `receipt`; an answer entry its claimed action's `receipt`; and every entry of an
        exchange the exchange's `answer_state`, over the calls the archive holds of it. `known`: the
        archive's entries the caller read (a search's candidates and neighbours), with their places: the
        entries near them are then read by place, a few groups each, not as one range from the first to
        the last (hits far apart in a long conversation made that range most of it)."""
        every = [*items, *(n for item in items for n in item.get("neighbours", []))]
        by_thread: dict[str, list[dict[str, Any]]] = {}
        for entry in every:
            if entry.get("exchange_id"):
                by_thread.setdefault(str(entry["thread"]), []).append(entry)
        if not by_thread:
            return
        near = await self._exchange_entries(tenant, every, known)
        exchanges = archived_exchanges([*every, *near])
        now = now_ms()
        for ref, found in by_thread.items():
            runs, receipts = await self.links(tenant, ref, (str(e["exchange_id"]) for e in found))
            for entry in found:
                if entry.get("role") == "tool":
                    link_entry(entry, runs)
                exchange = exchanges[(ref, str(entry["exchange_id"]))]
                archived_evidence(entry, exchange, receipts, now_ms=now, timeout_ms=self._timeout_ms)

    async def _exchange_entries(
        self, tenant: str, entries: list[dict[str, Any]], known: Sequence[Entry]
    ) -> list[dict[str, Any]]:
        """The entries near those of exchanges (within EXCHANGE_RADIUS in their conversation): where the
        exchanges' other calls and answers are, read per conversation without their texts (by place when
        `known` holds every one of them with its place: memlog/adapters/mongo_places.py)."""
        if self._archive is None:
            return []
        seqs: dict[ConversationRef, set[int]] = {}
        whole, held = held_whole(known), set()
        for entry in entries:
            try:
                thread, owner = parse_thread(str(entry["thread"]))
            except InvalidEvent:
                continue
            if thread == PUBLIC_THREAD or entry.get("seq") is None or entry.get("conversation") is None:
                continue  # the public thread archives no tool call
            ref = ConversationRef(tenant, thread, owner, str(entry["conversation"]))
            if (ref, str(entry.get("exchange_id"))) in whole:
                held.add((ref, str(entry.get("exchange_id"))))  # nothing of it is elsewhere: no read
                continue
            seqs.setdefault(ref, set()).add(int(entry["seq"]))
        archive = self._archive
        refs = list(seqs)
        reads = await asyncio.gather(
            *(
                archive.neighbours(ref, sorted(seqs[ref]), EXCHANGE_RADIUS, NEVER - 1, known, texts=False)
                for ref in refs
            )
        )
        return [
            *(_brief(found) for read in reads for near in read.values() for found in near),
            *(_brief(found) for exchange in held for found in whole[exchange]),
        ]


def held_whole(known: Sequence[Entry]) -> dict[tuple[ConversationRef, str], list[Entry]]:
    """The exchanges `known` holds whole, with their entries: from its question to its answer at
    consecutive places of its conversation, every call with its result. Nothing of such an exchange can
    be elsewhere (what lies between is all there, and it ended answered with no call open), so a read
    near it would add nothing to its calls or its state (a search's candidates hold most of the
    exchanges it shows: their reads by place cost most of a search's time on SecantusDB)."""
    by: dict[tuple[ConversationRef, str], dict[int, Entry]] = {}
    for entry in known:
        if entry.exchange_id is not None and entry.n is not None:
            by.setdefault((entry.ref, entry.exchange_id), {})[entry.n] = entry
    whole = {}
    for exchange, at in by.items():
        places = sorted(at)
        ordered = [at[n] for n in places]
        if places[-1] - places[0] + 1 != len(places) or len({e.seq for e in ordered}) != len(ordered):
            continue
        if ordered[0].role != "question" or ordered[-1].role != "answer":
            continue
        calls = archived_exchanges([_brief(e) for e in ordered]).get((_brief(ordered[0])["thread"], exchange[1]))
        if calls is not None and all(called is None for called in calls.calls.values()):
            whole[exchange] = ordered
    return whole


def _brief(entry: Entry) -> dict[str, Any]:
    return {
        "thread": thread_ref(entry.ref.thread, entry.ref.owner),
        "exchange_id": entry.exchange_id,
        "entry_id": entry.entry_id,
        "role": entry.role,
        "occurred_at": entry.occurred_at,
    }


def without_evidence(exchanges_json: bytes) -> bytes:
    """Ready views as a read with no evidence serves them: every call `ok` with no run (the defaults)."""
    views = from_json(exchanges_json)
    for view in views:
        view["tool_calls"] = [{**call, "status": "ok", "run_id": None, "receipt": None} for call in view["tool_calls"]]
        view["run_id"] = None
        view["receipt"] = None
        view["answer_state"] = None
    return to_json(views)
