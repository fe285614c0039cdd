"""The worker's scheduled step that makes the log forget: it shreds the period keys that are due.

A period's key is due once the longest lifetime of what its records feed has passed since the period
ended (`Settings.log_key_keep_ms`, from the lifetime settings); deleting it leaves the records on Kafka
as they are, unreadable by anyone, replay included (projections/periods.py). It runs in the privacy
set (exactly one worker set), every MEMLOG_LOG_KEY_CHECK_SECONDS, with no operator command; each run
that shreds something is recorded in the ledger (kind `period-keys-shredded`: a count and the cutoff,
no subject).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

from projections.periods import shred_cutoff_ms
from projections.ports import KeyVault, Ledger
from schemas.errors import StoreUnavailable
from streams.metrics import Metrics

log = logging.getLogger(__name__)

KEYS_PER_ROUND = 1000


async def shred_due_periods(
    vault: KeyVault, ledger: Ledger | None, keep_ms: int | None, now_ms: int, metrics: Metrics | None = None
) -> int:
    """Delete every period key that is due at `now_ms`; how many."""
    cutoff = shred_cutoff_ms(keep_ms, now_ms)
    if cutoff is None:
        return 0
    total = 0
    while (done := await vault.shred_periods(cutoff, KEYS_PER_ROUND)) > 0:
        total += done
        if done < KEYS_PER_ROUND:
            break
    if total:
        if metrics is not None:
            metrics.period_keys_shredded.inc(total)
        if ledger is not None:
            ended_by = dt.datetime.fromtimestamp(cutoff / 1000, dt.UTC).isoformat()
            await ledger.record("period-keys-shredded", keys=total, periods_ended_by=ended_by, by="schedule")
        log.info("shredded %d period keys of periods ended by %d", total, cutoff)
    return total


def shred_periods_on_timer(
    app: Any,
    vault: KeyVault,
    ledger: Ledger | None,
    keep_ms: int | None,
    interval: float,
    metrics: Metrics | None = None,
) -> None:
    """Shred the due period keys every `interval` seconds (nothing when no key is ever due, or with 0)."""
    if keep_ms is None or interval <= 0:
        return

    @app.timer(interval=interval)  # type: ignore[untyped-decorator]
    async def scheduled_period_shred() -> None:
        try:
            await shred_due_periods(vault, ledger, keep_ms, int(time.time() * 1000), metrics)
        except StoreUnavailable as exc:  # an outage: the next tick tries again
            log.warning("period key shredding put off: %s", exc)
