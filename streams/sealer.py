"""Seals records before they are produced and opens them before a projection applies them."""

from __future__ import annotations

import time
from typing import Any

from projections.ports import KeyVault
from projections.sealing import SealError, needs_seal, open_sealed, seal, sealed_key_id
from schemas.errors import DecodeError, Shredded


class Sealer:
    """The key vault plus a short cache of data keys for reading.

    Keys are cached for `cache_seconds`, for writing and for reading, so a short outage of the
    vault's MongoDB does not stop writes of active subjects. The process that erases a subject
    forgets its keys at once (`forget`); any other process within that bound, so an exchange
    written there in the seconds after an erasure can still be sealed with the erased key, and is
    then skipped like everything else of the erased subject.
    """

    def __init__(self, vault: KeyVault, cache_seconds: float = 5.0) -> None:
        self._vault = vault
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[bytes, float]] = {}
        self._writing: dict[tuple[str, str], tuple[str, bytes, float]] = {}

    async def seal(self, full_name: str, record: dict[str, Any]) -> dict[str, Any]:
        if not needs_seal(full_name, record):
            return record
        env = record["envelope"]
        who = (env["tenant"], env["subject"])
        now = time.monotonic()
        cached = self._writing.get(who)
        if cached is None or now - cached[2] > self._cache_seconds:
            key_id, key = await self._vault.key_for_write(*who)
            if len(self._writing) > 100_000:
                self._writing.clear()
            cached = self._writing[who] = (key_id, key, now)
        return seal(full_name, record, cached[0], cached[1])

    async def open_many(self, items: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any] | Shredded | DecodeError]:
        """Each record opened, Shredded when its key is gone, DecodeError when it does not open.

        One vault round trip fetches the keys not cached.
        """
        now = time.monotonic()
        wanted = {key_id for _, record in items if (key_id := sealed_key_id(record)) is not None}
        missing = [k for k in wanted if k not in self._cache or now - self._cache[k][1] > self._cache_seconds]
        if missing:
            found = await self._vault.keys_by_id(sorted(missing))
            for key_id in missing:
                if key_id in found:
                    self._cache[key_id] = (found[key_id], now)
                else:
                    self._cache.pop(key_id, None)
        if len(self._cache) > 100_000:
            self._cache.clear()
        out: list[dict[str, Any] | Shredded | DecodeError] = []
        for full_name, record in items:
            key_id = sealed_key_id(record)
            if key_id is None:
                out.append(record)
                continue
            cached = self._cache.get(key_id)
            if cached is None:
                env = record["envelope"]
                out.append(Shredded(f"{full_name} of {env['tenant']}/{env['subject']}: data key {key_id} is gone"))
                continue
            try:
                out.append(open_sealed(full_name, record, cached[0]))
            except SealError as exc:
                out.append(DecodeError(str(exc)))  # tampered or mislabelled: poison, not erased
        return out

    def forget(self) -> None:
        """Drop every cached key (after an erasure in this process)."""
        self._cache.clear()
        self._writing.clear()
