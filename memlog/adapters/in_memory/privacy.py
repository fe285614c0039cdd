"""The in-process key vault, ledger, export bundles, namespace pointer and namespace registry
(MongoDB's are in memlog/adapters/mongo_privacy.py)."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any

from projections.namespaces import ABANDONED, ACTIVE, BUILDING, PREVIOUS, NamespaceEntry
from projections.periods import KeyPeriods, period_key_id, period_range, period_ref
from projections.ports import Clock, utc_now
from projections.sealing import new_data_key, subject_digest, subject_ref, tenant_ref, unwrap_key, wrap_key
from schemas.errors import Conflict, SubjectErasing


@dataclass
class WrappedKey:
    """A data key as the vault holds it: encrypted under the master key."""

    key_id: str
    nonce: bytes
    wrapped: bytes
    erasing: bool = False
    ref: str | None = None  # a period key's subject (its standing key's name)
    ends_ms: int | None = None  # a period key's period end


class InMemoryKeyVault:
    """Data keys wrapped by the master key: a standing key per subject (or tenant), and per-period keys.

    Args:
        master: the 32-byte master key.
        keys: where the wrapped keys are held, by name; vaults given the same dict share it, as
            processes share the privacy database.
        periods: how the log's time is cut into key periods.
    """

    def __init__(
        self, master: bytes, keys: dict[str, WrappedKey] | None = None, periods: KeyPeriods | None = None
    ) -> None:
        self._master = master
        self._keys = {} if keys is None else keys
        self._periods = periods or KeyPeriods()

    def _unwrap(self, ref: str, held: WrappedKey) -> bytes:
        return unwrap_key(self._master, f"{ref}\x1f{held.key_id}", held.nonce, held.wrapped)

    def _make(self, name: str, key_id: str, of: str | None = None, ends_ms: int | None = None) -> tuple[str, bytes]:
        data_key = new_data_key()
        nonce, wrapped = wrap_key(self._master, f"{name}\x1f{key_id}", data_key)
        self._keys[name] = WrappedKey(key_id, nonce, wrapped, ref=of, ends_ms=ends_ms)
        return key_id, data_key

    def _held(self, tenant: str, subject: str | None, ref: str) -> tuple[str, bytes]:
        held = self._keys[ref]
        if held.erasing:
            raise SubjectErasing(tenant, subject or "")
        return held.key_id, self._unwrap(ref, held)

    def _period(self, tenant: str, subject: str, ref: str, at_ms: int) -> tuple[str, bytes]:
        label = self._periods.label(at_ms)
        name = period_ref(ref, label)
        if name not in self._keys:
            return self._make(name, period_key_id(label), ref, period_range(label)[1])
        return self._held(tenant, subject, name)

    async def key_for_write(self, tenant: str, subject: str | None, at_ms: int | None = None) -> tuple[str, bytes]:
        ref = tenant_ref(tenant) if subject is None else subject_ref(tenant, subject)
        if ref not in self._keys:
            self._make(ref, uuid.uuid4().hex)
        standing = self._held(tenant, subject, ref)
        if at_ms is None or subject is None:
            return standing
        return self._period(tenant, subject, ref, at_ms)

    async def key_in_use(self, tenant: str, subject: str | None, at_ms: int | None = None) -> tuple[str, bytes] | None:
        ref = tenant_ref(tenant) if subject is None else subject_ref(tenant, subject)
        if ref not in self._keys:
            return None
        standing = self._held(tenant, subject, ref)
        if at_ms is None or subject is None:
            return standing
        return self._period(tenant, subject, ref, at_ms)

    async def keys_by_id(self, key_ids: list[str]) -> dict[str, bytes]:
        wanted = set(key_ids)
        return {
            held.key_id: self._unwrap(ref, held)
            for ref, held in self._keys.items()
            if held.key_id in wanted and not held.erasing
        }

    def _all_of(self, tenant: str, subject: str) -> list[str]:
        ref = subject_ref(tenant, subject)
        return [name for name, held in self._keys.items() if ref in (name, held.ref)]

    async def begin_erasure(self, tenant: str, subject: str) -> None:
        for name in self._all_of(tenant, subject):
            self._keys[name].erasing = True

    async def delete(self, tenant: str, subject: str) -> int:
        names = self._all_of(tenant, subject)
        for name in names:
            del self._keys[name]
        return len(names)

    async def shred_periods(self, ended_by_ms: int, limit: int = 1000) -> int:
        due = [name for name, held in self._keys.items() if held.ends_ms is not None and held.ends_ms <= ended_by_ms]
        for name in due[:limit]:
            del self._keys[name]
        return len(due[:limit])


class InMemoryLedger:
    """Ledger entries by id; subjects named by their keyed digest, as MongoLedger names them."""

    def __init__(self, master: bytes, clock: Clock = utc_now) -> None:
        self._entries: dict[str, dict[str, Any]] = {}
        self._master = master
        self._clock = clock

    async def record(self, kind: str, *, subject: str | None = None, **fields: Any) -> str:
        entry_id = str(fields.pop("entry_id", None) or uuid.uuid4())
        if subject is not None:
            fields["subject_digest"] = subject_digest(self._master, fields["tenant"], subject)
        if entry_id not in self._entries:  # recorded already: a redelivered event
            self._entries[entry_id] = {"_id": entry_id, "kind": kind, "at": self._clock(), **copy.deepcopy(fields)}
        return entry_id

    async def get(self, entry_id: str) -> dict[str, Any] | None:
        return copy.deepcopy(self._entries.get(entry_id))

    async def entries(
        self,
        *,
        tenant: str | None = None,
        subject: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        before: tuple[dt.datetime, str] | None = None,
    ) -> list[dict[str, Any]]:
        digest = None
        if subject is not None:
            if tenant is None:
                raise ValueError("a subject is only known within its tenant")
            digest = subject_digest(self._master, tenant, subject)
        found = [
            entry
            for entry in self._entries.values()
            if tenant in (None, entry.get("tenant"))
            and digest in (None, entry.get("subject_digest"))
            and kind in (None, entry["kind"])
            and (before is None or (entry["at"], entry["_id"]) < before)
        ]
        found.sort(key=lambda entry: (entry["at"], entry["_id"]), reverse=True)
        return copy.deepcopy(found[:limit])

    async def erased(self, tenant: str, subject: str) -> dict[str, Any] | None:
        found = await self.entries(tenant=tenant, subject=subject, kind="erased", limit=1)
        return found[0] if found else None


class InMemoryExports:
    """Export bundles by request id, in parts of at most `part_bytes` (kept until erased: no expiry here)."""

    def __init__(self, part_bytes: int = 4 * 1024 * 1024) -> None:
        self._bundles: dict[str, dict[str, Any]] = {}
        self._parts: dict[str, list[bytes]] = {}
        self._part_bytes = part_bytes

    async def put(self, request_id: str, tenant: str, subject: str, chunks: AsyncIterable[bytes]) -> int:
        self._bundles.pop(request_id, None)
        data = b"".join([chunk async for chunk in chunks])
        step = self._part_bytes
        self._parts[request_id] = [data[start : start + step] for start in range(0, len(data), step)] or [b""]
        self._bundles[request_id] = {
            "_id": request_id,
            "tenant": tenant,
            "subject": subject,
            "size": len(data),
            "parts": len(self._parts[request_id]),
            "created_at": utc_now(),
        }
        return len(data)

    async def get(self, request_id: str) -> dict[str, Any] | None:
        return copy.deepcopy(self._bundles.get(request_id))

    async def read(self, request_id: str) -> AsyncIterator[bytes]:
        if request_id not in self._bundles:
            return
        for part in list(self._parts.get(request_id, ())):
            yield part

    async def erase_subject(self, tenant: str, subject: str) -> int:
        gone = [key for key, held in self._bundles.items() if (held["tenant"], held["subject"]) == (tenant, subject)]
        for key in gone:
            del self._bundles[key]
            self._parts.pop(key, None)
        return len(gone)


class InMemoryReplayLease:
    """The replay lease of one app id, without expiry (a process's replays end with it)."""

    def __init__(self) -> None:
        self._holder: str | None = None
        self._note = ""

    async def take(self, holder: str, note: str = "") -> None:
        if self._holder not in (None, holder):
            raise Conflict(f"a replay is running already ({self._note or self._holder}); one at a time")
        self._holder, self._note = holder, note or self._note

    async def release(self, holder: str) -> None:
        if self._holder == holder:
            self._holder = None

    async def holder(self) -> str | None:
        return self._holder


class InMemoryNamespacePointer:
    """The namespace one app id reads and writes."""

    def __init__(self) -> None:
        self._namespace: str | None = None
        self._info: dict[str, Any] = {}

    async def active(self) -> str | None:
        return self._namespace

    async def switch(self, namespace: str, **info: Any) -> None:
        expected = info.get("previous")
        if expected is not None and self._namespace not in (None, expected):
            raise Conflict(f"the namespace pointer moved from {expected} to {self._namespace} meanwhile: not switched")
        self._namespace = namespace
        self._info = dict(info)


class InMemoryNamespaceRegistry:
    """The namespaces of one app id, by name (projections.namespaces).

    Args:
        clock: when a state changes or a replay is heard of.
    """

    def __init__(self, clock: Clock = utc_now) -> None:
        self._entries: dict[str, NamespaceEntry] = {}
        self._clock = clock

    def _put(
        self,
        namespace: str,
        state: str,
        note: str,
        *,
        retired_at: dt.datetime | None = None,
        seen_at: dt.datetime | None = None,
    ) -> None:
        now = self._clock()
        held = self._entries.get(namespace)
        created = now if held is None else held.created_at
        self._entries[namespace] = NamespaceEntry(namespace, state, created, now, retired_at, seen_at, note)

    async def building(self, namespace: str, note: str = "") -> None:
        held = self._entries.get(namespace)
        if held is not None and held.state == ACTIVE:
            raise Conflict(f"{namespace} is the active namespace; a replay builds into a fresh one")
        self._put(namespace, BUILDING, note, seen_at=self._clock())

    async def heard(self, namespace: str) -> None:
        held = self._entries.get(namespace)
        if held is not None:
            self._entries[namespace] = dataclasses.replace(held, seen_at=self._clock())

    async def activate(self, namespace: str) -> list[str]:
        held = self._entries.get(namespace)
        if held is None or held.state != ACTIVE:
            self._put(namespace, ACTIVE, "" if held is None else held.note)
        retired = [e.namespace for e in self._entries.values() if e.state == ACTIVE and e.namespace != namespace]
        for name in retired:
            now = self._clock()
            self._entries[name] = dataclasses.replace(self._entries[name], state=PREVIOUS, since=now, retired_at=now)
        return retired

    async def abandon(self, namespace: str, note: str) -> None:
        held = self._entries.get(namespace)
        if held is not None and held.state == BUILDING:
            now = self._clock()
            self._entries[namespace] = dataclasses.replace(held, state=ABANDONED, since=now, retired_at=now, note=note)

    async def adopt(self, namespace: str, note: str) -> bool:
        if namespace in self._entries:
            return False
        self._put(namespace, PREVIOUS, note, retired_at=self._clock())
        return True

    async def get(self, namespace: str) -> NamespaceEntry | None:
        return self._entries.get(namespace)

    async def entries(self) -> list[NamespaceEntry]:
        return sorted(self._entries.values(), key=lambda entry: (entry.created_at, entry.namespace))

    async def remove(self, namespace: str) -> None:
        self._entries.pop(namespace, None)


class InMemoryReplayRecords:
    def __init__(self) -> None:
        self._records: dict[str, dict[str, Any]] = {}

    async def save(self, replay_id: str, record: dict[str, Any]) -> None:
        self._records[replay_id] = copy.deepcopy(record)

    async def get(self, replay_id: str) -> dict[str, Any] | None:
        found = self._records.get(replay_id)
        return None if found is None else copy.deepcopy(found)

    async def running(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(r) for r in self._records.values() if r.get("state") == "running"]
