"""Receipts (seed 004, "evidence you can check"): the stored document of a ReceiptRecorded, and its link as a
thread's served mark keeps it. Pure: the position and the redactor are passed in.

A receipt is kept as long as a trace (TRACE_DAYS after it was recorded): it is trace evidence, and reads
join it to the exchange's calls by (thread, exchange id, call index) as they join runs.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from projections.archives import thread_ref
from projections.position import Position
from projections.redaction import Redactor
from schemas.events import ReceiptRecorded
from schemas.limits import INT64_MAX

if TYPE_CHECKING:  # projections.traces reads the links this module writes
    from projections.session import ThreadKey
    from projections.traces import Served

DAY_MS = 86_400_000


def receipt_document(
    event: ReceiptRecorded, position: Position, redactor: Redactor, keep_days: float
) -> dict[str, Any]:
    """The stored receipt, one per record of the log: `_id` is its position (partition and offset) within
    the tenant, so a redelivered record stores nothing new and a replay stores the same documents."""
    env = event.envelope
    return {
        "_id": f"{len(env.tenant)}:{env.tenant}:{position.partition}:{position.offset}",
        "tenant": env.tenant,
        "subject": env.subject,
        "agent": env.agent,
        "receipt_id": event.receipt_id,
        "exchange_id": event.exchange_id,
        "call_index": event.call_index,
        "result": event.result,
        "detail": None if event.detail is None else redactor.text(event.detail),
        "recorded_at": env.occurred_at,
        "partition": position.partition,
        "offset": position.offset,
        "exchange_thread": thread_ref(env.thread, env.owner),
        "expires_at": min(env.occurred_at + round(keep_days * DAY_MS), INT64_MAX),
    }


def is_receipt(doc: dict[str, Any]) -> bool:
    return "receipt_id" in doc


def receipt_link(doc: dict[str, Any]) -> dict[str, Any]:
    """A stored receipt as a link: what `projections.evidence.latest_receipts` reads (in a served mark, or
    from the store)."""
    return {
        "exchange_id": doc["exchange_id"],
        "call_index": doc.get("call_index"),
        "receipt": doc["result"],
        "recorded_at": int(doc.get("recorded_at") or 0),
        "offset": int(doc.get("offset") or 0),
        "expires_at": int(doc.get("expires_at") or 0),
    }


def receipt_line(doc: dict[str, Any]) -> bytes:
    return json.dumps(receipt_link(doc), separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def receipt_view(doc: dict[str, Any]) -> dict[str, Any]:
    """A receipt as an export bundle or a read shows it."""
    keep = ("receipt_id", "exchange_id", "call_index", "result", "detail", "recorded_at", "exchange_thread")
    return {key: doc.get(key) for key in keep}


class ReceiptStore(Protocol):
    """Receipts (seed 004, evidence you can check), one document per record of the log as
    `projections.receipts.receipt_document` makes it (`_id`: its tenant, partition and offset), kept until
    its `expires_at`. Reads take the time (`now_ms`) and never return an expired receipt."""

    async def append(self, docs: list[dict[str, Any]]) -> int:
        """Store the receipts; one stored already (the same `_id`: a redelivered record) is skipped.
        Returns how many were new."""
        ...

    async def served(self, tenant: str, thread: str, exchange_ids: list[str], now_ms: int) -> list[dict[str, Any]]:
        """The unexpired receipts of these exchanges of `thread` (`projections.archives.thread_ref`), each as
        its link (`projections.receipts.receipt_link`; `projections.evidence.latest_receipts` picks one
        per call)."""
        ...

    async def served_threads(self, now_ms: int) -> dict[ThreadKey, Served]:
        """Every thread an unexpired receipt names, with the links of its receipts there: what the served
        marks must hold (`projections.traces.served_threads` over every stored receipt)."""
        ...

    async def erase_subject(self, tenant: str, subject: str) -> int:
        """Every receipt about the subject; how many."""
        ...

    async def export_subject(self, tenant: str, subject: str) -> list[dict[str, Any]]:
        """Every receipt about the subject, as `projections.receipts.receipt_view` shows it, oldest first."""
        ...
