"""Seals records before they are produced and opens them before a projection applies them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from contextvars import ContextVar
from typing import Any

from projections.periods import PERIOD_SEALED, KeyPeriods, period_of, period_range
from projections.ports import KeyVault
from projections.sealing import SealError, needs_seal, open_sealed, seal, sealed_key_id
from schemas.errors import DecodeError, PeriodShredded, Shredded

Who = tuple[str, str | None]  # (tenant, subject); no subject: the tenant's own key
_BATCH: ContextVar[int | None] = ContextVar("memlog_sealer_batch", default=None)  # the task's batch, if any


class Sealer:
    """The key vault plus a short cache of data keys for reading.

    Keys are cached for `cache_seconds`, for writing and for reading, so a short outage of the
    vault's MongoDB does not stop writes of active subjects. The process that erases a subject
    forgets its keys at once (`forget`) and waits for its projection batches that began before
    (`batch`, `settled`), since they may hold events opened with the erased key; any other process
    stops using the key within `cache_seconds`, so an exchange written there in the seconds after an
    erasure can still be sealed with the erased key, and is then skipped like everything else of the
    erased subject.
    """

    def __init__(self, vault: KeyVault, cache_seconds: float = 5.0, periods: KeyPeriods | None = None) -> None:
        self._vault = vault
        self._cache_seconds = cache_seconds
        self._periods = periods or KeyPeriods()  # the vault's, to find a cached period key
        self._cache: dict[str, tuple[bytes, float]] = {}
        self._writing: dict[tuple[str, str | None, str | None], tuple[str, bytes, float]] = {}
        self._epoch = 0  # moves on with every `forget`
        self._next_batch = 0
        self._batches: dict[int, int] = {}  # projection batches in flight: token -> the epoch they began in
        self._changed = asyncio.Condition()

    def _cached(self, tenant: str, subject: str | None, at_ms: int | None) -> tuple[str, bytes] | None:
        label = None if at_ms is None or subject is None else self._periods.label(at_ms)
        cached = self._writing.get((tenant, subject, label))
        if cached is None or time.monotonic() - cached[2] > self._cache_seconds:
            return None
        held = period_of(cached[0])
        if at_ms is not None and held is not None and not period_range(held)[0] <= at_ms < period_range(held)[1]:
            return None  # the vault cuts periods otherwise than this sealer was told
        return cached[0], cached[1]

    def _keep(self, tenant: str, subject: str | None, at_ms: int | None, key: tuple[str, bytes]) -> None:
        label = None if at_ms is None or subject is None else self._periods.label(at_ms)
        if len(self._writing) > 100_000:
            self._writing.clear()
        self._writing[(tenant, subject, label)] = (key[0], key[1], time.monotonic())

    async def key_for_write(self, tenant: str, subject: str | None, at_ms: int | None = None) -> tuple[str, bytes]:
        """The (key id, data key) that seals events about `subject` (None: the tenant's own key), made on
        first use: the subject's standing key, or with `at_ms` its key of the period holding that instant;
        from the cache while it is younger than `cache_seconds`. Raises SubjectErasing while the subject
        is being erased."""
        cached = self._cached(tenant, subject, at_ms)
        if cached is None:
            cached = await self._vault.key_for_write(tenant, subject, at_ms)
            self._keep(tenant, subject, at_ms, cached)
        return cached

    async def key_in_use(self, tenant: str, subject: str | None, at_ms: int | None = None) -> tuple[str, bytes] | None:
        """`key_for_write`'s key (from the cache, or the vault) without making the subject's standing
        key; None when there is none (erased, or never written)."""
        cached = self._cached(tenant, subject, at_ms)
        if cached is not None:
            return cached
        return await self._vault.key_in_use(tenant, subject, at_ms)

    async def seal(
        self, full_name: str, record: dict[str, Any], pinned: Mapping[Who, tuple[str, bytes]] | None = None
    ) -> dict[str, Any]:
        """The record sealed under its subject's key (its tenant's without a subject): the key of the
        period its time falls in for the events of `PERIOD_SEALED` (a time ahead of the clock counts
        as now), the subject's standing key for the others.

        `pinned` holds keys taken earlier, by (tenant, subject): a record derived from data read after
        its key was taken (a fold's summary) is sealed under that key and no other, so an erasure in
        between shreds it too, instead of a fresh key made after the erasure keeping it readable.
        """
        if not needs_seal(full_name):
            return record
        env = record["envelope"]
        who: Who = (env["tenant"], env["subject"])
        held = None if pinned is None else pinned.get(who)
        if held is None:
            at_ms = None  # the standing key
            if full_name in PERIOD_SEALED:
                at_ms = min(_millis(env.get("occurred_at")), int(time.time() * 1000))
            held = await self.key_for_write(*who, at_ms)
        return seal(full_name, record, held[0], held[1])

    async def open_many(self, items: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any] | Shredded | DecodeError]:
        """Each record opened, Shredded when its key is gone, DecodeError when it does not open.

        One vault round trip fetches the keys not cached.
        """
        await self.refresh({key_id for _, record in items if (key_id := sealed_key_id(record)) is not None})
        out: list[dict[str, Any] | Shredded | DecodeError] = []
        for full_name, record in items:
            key_id = sealed_key_id(record)
            if key_id is None:
                out.append(record)
                continue
            cached = self._cache.get(key_id)
            if cached is None:
                env = record["envelope"]
                period = period_of(key_id)
                gone = f"{full_name} of {env['tenant']}/{env['subject']}: data key {key_id} is gone"
                out.append(Shredded(gone) if period is None else PeriodShredded(gone, period))
                continue
            try:
                out.append(open_sealed(full_name, record, cached[0]))
            except SealError as exc:
                out.append(DecodeError(str(exc)))  # tampered or mislabelled: poison, not erased
        return out

    async def refresh(self, key_ids: set[str]) -> set[str]:
        """Fetch the keys among `key_ids` that are not cached or older than `cache_seconds` (one vault round
        trip); returns those that open records now, as `open_many` would find them."""
        now = time.monotonic()
        if len(self._cache) > 100_000:  # cleared before, not after, the keys wanted now are fetched
            self._cache.clear()
        missing = [k for k in key_ids if k not in self._cache or now - self._cache[k][1] > self._cache_seconds]
        if missing:
            found = await self._vault.keys_by_id(sorted(missing))
            for key_id in missing:
                if key_id in found:
                    self._cache[key_id] = (found[key_id], now)
                else:
                    self._cache.pop(key_id, None)
        return {key_id for key_id in key_ids if key_id in self._cache}

    def forget(self) -> int:
        """Drop every cached key (an erasure in this process has begun); returns the epoch to settle:
        `settled(epoch)` waits for every batch that began before this call."""
        self._cache.clear()
        self._writing.clear()
        self._epoch += 1
        return self._epoch - 1

    @contextlib.asynccontextmanager
    async def batch(self) -> AsyncIterator[None]:
        """A projection's batch, from opening its records to writing them: an erasure waits for those
        that began before it (`settled`), since they may hold records opened with the erased key."""
        self._next_batch += 1
        token = self._next_batch
        self._batches[token] = self._epoch
        reset = _BATCH.set(token)
        try:
            yield
        finally:
            _BATCH.reset(reset)
            del self._batches[token]
            async with self._changed:
                self._changed.notify_all()

    async def settled(self, epoch: int) -> None:
        """Return once every batch of this process that began in `epoch` or before has ended (but the
        caller's own)."""
        mine = _BATCH.get()
        async with self._changed:
            await self._changed.wait_for(
                lambda: not any(began <= epoch for token, began in self._batches.items() if token != mine)
            )


def _millis(value: Any) -> int:
    """An envelope's `occurred_at` as epoch milliseconds (an int, or a datetime once decoded)."""
    if isinstance(value, int):
        return value
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1000)
    return int(time.time() * 1000)
