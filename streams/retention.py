"""Conversation retention (seed 004), one run for the operator's command and for the worker's schedule.

The plan is a pure rule (`projections.archives.plan_retention`); a confirmed run re-checks each target just
before it purges it (`ThreadPurged` marked as retention, only while the newest entry is the planned one), so
a conversation that moved on since it was planned is spared. The worker runs it for every tenant every
MEMLOG_RETENTION_CHECK_SECONDS, so retention needs no operator once it is enabled.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from projections.archives import (
    RETENTION_PURGE,
    ConversationMeta,
    ConversationRef,
    RetentionPolicy,
    plan_retention,
    retention_reason,
)
from projections.generations import generations_due, generations_reason
from projections.ports import ConversationArchive, Ledger
from schemas.errors import StoreUnavailable
from schemas.events import AUTOMATION_THREAD, SESSION_THREAD, Envelope, ThreadPurged
from streams.producer import EventProducer

log = logging.getLogger(__name__)


def envelope_for(ref: ConversationRef, producer: str, occurred_at: int | None = None) -> Envelope:
    """The envelope of an operation on a conversation: its subject for a session, its agent for automation."""
    extra: dict[str, Any] = {} if occurred_at is None else {"occurred_at": occurred_at}
    return Envelope(
        tenant=ref.tenant,
        thread=ref.thread,
        subject=ref.owner if ref.thread == SESSION_THREAD else None,
        agent=ref.owner if ref.thread == AUTOMATION_THREAD else None,
        producer=producer,
        **extra,
    )


async def apply_retention(
    store: ConversationArchive,
    producer: EventProducer | None,
    producer_name: str,
    tenant: str,
    policy: RetentionPolicy,
    now_ms: int,
    *,
    confirm: bool = False,
    ledger: Ledger | None = None,
    by: str = "operator",
) -> dict[str, Any]:
    """Dry run by default: the targets. Confirmed: each target is re-checked, then purged, and each purge is
    recorded in the ledger (kind `retention`; a session's subject only as its digest). Main's older
    generations past `policy.generation_ms` are listed (`generations`) and purged the same way."""
    metas = await store.conversations(tenant)
    targets = plan_retention(metas, policy, now_ms)
    report: dict[str, Any] = {
        "tenant": tenant,
        "enabled": policy.enabled,
        "days": dict(policy.days),
        "generation_seconds": policy.generation_ms / 1000,
        "dry_run": not confirm,
        "targets": [t.view() for t in targets],
        "generations": [],
        "purged": [],
        "skipped": [],
    }
    kept = [m for m in metas if generations_reason(m, policy) is None]
    await _older_generations(store, producer, producer_name, kept, policy, now_ms, report, ledger, by)
    if not confirm:
        return report
    assert producer is not None, "a confirmed retention run produces its purges"
    for target in targets:
        fresh: ConversationMeta | None = await store.meta(target.meta.ref)
        reason = "gone already" if fresh is None else retention_reason(fresh, policy, now_ms)
        if reason is None and fresh is not None and fresh.last_seq != target.meta.last_seq:
            reason = "changed since it was planned"
        if reason is not None or fresh is None:
            report["skipped"].append({"conversation": target.meta.ref.conversation, "reason": reason})
            continue
        envelope = envelope_for(fresh.ref, producer_name)
        event = ThreadPurged(envelope, fresh.ref.conversation, RETENTION_PURGE, expect_last_seq=fresh.last_seq)
        position = await producer.produce([event])
        report["purged"].append({**fresh.view(), "position": position.token()})
        if ledger is not None:
            await ledger.record(
                "retention",
                subject=envelope.subject,
                tenant=tenant,
                thread=fresh.ref.thread,
                conversation=fresh.ref.conversation,
                conversation_kind=fresh.kind,
                last_at=fresh.last_at,
                position=position.token(),
                by=by,
            )
    log.info(
        "retention of %s: %d purged, %d skipped, %d of main's generations",
        tenant,
        len(report["purged"]),
        len(report["skipped"]),
        len(report["generations"]),
    )
    return report


async def _older_generations(
    store: ConversationArchive,
    producer: EventProducer | None,
    producer_name: str,
    metas: list[ConversationMeta],
    policy: RetentionPolicy,
    now_ms: int,
    report: dict[str, Any],
    ledger: Ledger | None,
    by: str,
) -> None:
    """Main's generations (what folds and resets took out of its transcript) older than the limit: listed,
    and once confirmed purged up to the newest due one (`ThreadPurged.generations_until`), each ledgered.
    The transcript, and so a running exchange, is never touched; the conversation stays."""
    for meta in metas:
        ages = await store.generation_ages(meta.ref)
        due = generations_due(ages, policy.generation_ms, now_ms)
        if due is None:
            continue
        entries = sum(a.entries for a in ages if a.taken_at <= due.taken_at)
        target = {**meta.view(), "tenant": meta.ref.tenant, "generations_until": str(due.taken_at), "entries": entries}
        target["newest_at"] = due.newest
        report["generations"].append(target)
        if report["dry_run"]:
            continue
        assert producer is not None, "a confirmed retention run produces its purges"
        envelope = envelope_for(meta.ref, producer_name)
        event = ThreadPurged(envelope, meta.ref.conversation, RETENTION_PURGE, generations_until=due.taken_at)
        position = await producer.produce([event])
        target["position"] = position.token()
        if ledger is not None:
            await ledger.record(
                "retention",
                subject=envelope.subject,
                tenant=meta.ref.tenant,
                thread=meta.ref.thread,
                conversation=meta.ref.conversation,
                conversation_kind=meta.kind,
                generations_until=due.taken_at,
                entries=entries,
                last_at=due.newest,
                position=position.token(),
                by=by,
            )


def retention_on_timer(
    app: Any,
    store: ConversationArchive,
    producer: EventProducer,
    producer_name: str,
    policy: RetentionPolicy,
    interval: float,
    ledger: Ledger | None = None,
) -> None:
    """Apply retention to every tenant's conversations every `interval` seconds (nothing while disabled)."""
    if not policy.enabled or interval <= 0:
        return

    @app.timer(interval=interval)  # type: ignore[untyped-decorator]
    async def scheduled_retention() -> None:
        try:
            tenants = await store.tenants()
            for tenant in tenants:
                await apply_retention(
                    store,
                    producer,
                    producer_name,
                    tenant,
                    policy,
                    int(time.time() * 1000),
                    confirm=True,
                    ledger=ledger,
                    by="schedule",
                )
        except StoreUnavailable as exc:  # an outage: the next tick tries again
            log.warning("scheduled retention put off: %s", exc)
