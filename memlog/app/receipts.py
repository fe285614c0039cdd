"""Receipts (seed 004, "evidence you can check"): a backend records the checked outcome of one tool call of
an exchange, or of the action its answer claims, correlated by the exchange id and the call index. The
answer's state (verified, unverified, incomplete) is made from them at read time (projections/evidence.py)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from projections.position import Position
from projections.redaction import Redactor
from schemas.events import AUTOMATION_THREAD, SESSION_THREAD, Envelope, ReceiptRecorded, now_ms
from streams.producer import EventProducer


@dataclass(frozen=True)
class Receipt:
    tenant: str
    subject: str | None
    agent: str
    exchange_id: str
    call_index: int | None  # None: the action the answer claims as a whole
    result: str  # passed, failed, failed_expected, not_run
    detail: str | None = None
    receipt_id: str | None = None  # None: a new one
    thread: str | None = None  # the exchange's thread; None: the subject's session, else the agent's automation
    recorded_at: int | None = None  # None: now


def receipt_event(receipt: Receipt, producer: str, redactor: Redactor) -> ReceiptRecorded:
    """The receipt as an event, its detail redacted before it is produced."""
    envelope = Envelope(
        tenant=receipt.tenant,
        subject=receipt.subject,
        agent=receipt.agent,
        thread=receipt.thread or (SESSION_THREAD if receipt.subject else AUTOMATION_THREAD),
        producer=producer,
        occurred_at=now_ms() if receipt.recorded_at is None else receipt.recorded_at,
    )
    return ReceiptRecorded(
        envelope,
        receipt.receipt_id or str(uuid.uuid4()),
        receipt.exchange_id,
        receipt.call_index,
        receipt.result,
        None if receipt.detail is None else redactor.text(receipt.detail),
    )


class Receipts:
    """Args:
    producer: where receipts go (the traces topic).
    producer_name: the envelope's producer.
    redactor: removes secrets from a receipt's detail before it is produced.
    """

    def __init__(self, producer: EventProducer, producer_name: str, redactor: Redactor) -> None:
        self._producer = producer
        self._producer_name = producer_name
        self._redactor = redactor

    async def record(self, receipt: Receipt) -> tuple[str, Position]:
        """The receipt's id and its position on the log (`after` for a read that must see it)."""
        event = receipt_event(receipt, self._producer_name, self._redactor)
        return event.receipt_id, await self._producer.produce([event])
