"""Disk within a bound (issue 36): after an erasure or a retention purge the worker rewrites the storage
engines' files by itself, within MEMLOG_COMPACT_AFTER_SECONDS, as `memlog compact` does by command.

The ledger says what needs it: a compaction is due while an `erased` or `retention` entry is newer than
what the last compaction covered. A compaction covers the entries recorded a settling time before it
started (a retention purge is ledgered when it is put on the log, and applied by the archive a moment
later), and is itself ledgered (kind `compacted`, `by` schedule or operator), so a restarted worker, or
another one, knows where the last one stopped. `/metrics` of the worker says when it last did.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis
from pymongo import AsyncMongoClient

from memlog.adapters.maintenance import compact_mongo, rewrite_redis
from memlog.config.settings import Settings
from projections.ports import Clock, Ledger, NamespaceRegistry, utc_now
from schemas.errors import StoreUnavailable
from streams.metrics import Metrics

log = logging.getLogger(__name__)

DELETING = ("erased", "retention")  # ledger kinds after which bytes linger in the engines' files
COMPACTED = "compacted"


async def compact_storage(
    settings: Settings,
    mongo: AsyncMongoClient[dict[str, Any]],
    redis: aioredis.Redis,
    registry: NamespaceRegistry,
) -> list[str]:
    """The privacy database (the deleted data keys) and the database of every namespace of this app the
    registry holds are compacted, and Redis rewrites its files; one line says what was done to each."""
    recorded = {entry.namespace for entry in await registry.entries()}
    recorded.add(settings.namespace)
    databases = sorted(settings.model_copy(update={"namespace": name}).mongo_db_name for name in recorded)
    return [*await compact_mongo(mongo, [settings.privacy_database, *databases]), await rewrite_redis(redis)]


def _settle(interval: float) -> float:
    return min(interval, 30.0)


async def compaction_due(ledger: Ledger) -> dt.datetime | None:
    """The newest deleting entry not covered by the last compaction, or None when nothing waits."""
    last = await ledger.entries(kind=COMPACTED, limit=1)
    covered: dt.datetime | None = last[0].get("covers_until") if last else None
    newest: dt.datetime | None = None
    for kind in DELETING:
        found = await ledger.entries(kind=kind, limit=1)
        if found and (newest is None or _aware(found[0]["at"]) > newest):
            newest = _aware(found[0]["at"])
    if newest is None or (covered is not None and newest <= _aware(covered)):
        return None
    return newest


def _aware(at: dt.datetime) -> dt.datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)


async def compact_if_due(
    ledger: Ledger,
    compact: Callable[[], Awaitable[list[str]]],
    settle_seconds: float,
    metrics: Metrics | None = None,
    clock: Clock = utc_now,
) -> list[str] | None:
    """Compact when an erasure or purge waits for it; ledgered. None when nothing was due."""
    started = clock()
    if await compaction_due(ledger) is None:
        return None
    lines = await compact()
    covers = started - dt.timedelta(seconds=settle_seconds)
    await ledger.record(COMPACTED, covers_until=covers, done=lines, by="schedule")
    if metrics is not None:
        metrics.compacted.set(time.time())
    log.info("storage compacted after erasures or purges: %s", "; ".join(lines))
    return lines


def compact_on_timer(
    app: Any,
    ledger: Ledger,
    compact: Callable[[], Awaitable[list[str]]],
    after_seconds: float,
    metrics: Metrics,
) -> None:
    """Check every third of MEMLOG_COMPACT_AFTER_SECONDS: an entry is covered by a tick at most two
    thirds of it after it was recorded (a settling third, a tick's third), leaving a third to compact in."""
    if after_seconds <= 0:
        return
    interval = after_seconds / 3
    known: list[bool] = []

    @app.timer(interval=interval)  # type: ignore[untyped-decorator]
    async def scheduled_compaction() -> None:
        try:
            if not known:  # the last compaction, by any process, before this one started
                last = await ledger.entries(kind=COMPACTED, limit=1)
                if last:
                    metrics.compacted.set(_aware(last[0]["at"]).timestamp())
                known.append(True)
            await compact_if_due(ledger, compact, _settle(interval), metrics)
        except StoreUnavailable as exc:  # an outage: the next tick tries again
            log.warning("scheduled compaction put off: %s", exc)
