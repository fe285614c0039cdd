"""The namespaces of an app id, as the worker, replay and the CLI act on them (projections.namespaces).

Every namespace written into is in the registry: the worker records its own as active, a replay
records its target as building and then as active (switched to) or abandoned (built with
`--no-switch`, or failed). Erasure reaches every recorded namespace (`others`). A namespace out of use
is dropped once `MEMLOG_NAMESPACE_GRACE_SECONDS` has passed: by the worker every
`MEMLOG_NAMESPACE_CHECK_SECONDS`, and by a replay right after its switch. The namespace pointer stays
the truth about which one is active: nothing drops the namespace it names, and the registry is set
right from it whenever they disagree (a process that stopped between the two writes).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from memlog.config.settings import Settings
from projections.namespaces import NamespaceEntry, due_for_drop, valid_name, why_not_drop
from projections.ports import Clock, NamespacePointer, NamespaceRegistry, utc_now
from schemas.errors import Conflict, NotFound, StoreRefused, StoreUnavailable
from streams.steps.privacy import NamespaceData

log = logging.getLogger(__name__)


class NamespaceStores(NamespaceData, Protocol):
    """A namespace's stores that can also delete the whole namespace (memlog.adapters.wiring.Stores is one)."""

    async def drop(self) -> None: ...


OpenStores = Callable[[str], NamespaceStores]
FoundDatabases = Callable[[], Awaitable[list[str]]]


class Namespaces:
    """The namespaces of one app id: where they are, what they hold, and dropping the ones out of use.

    Args:
        settings: the configured settings: app id, base namespace, grace period.
        pointer: the namespace pointer, the truth about which namespace is active.
        registry: the namespaces recorded.
        open_stores: a namespace's stores over the process's clients (memlog.adapters.wiring.open_stores).
        databases: the MongoDB database names on the server, to find namespaces made before the registry.
        clock: the time the grace period is measured against (the registry's own clock dates entries).
    """

    def __init__(
        self,
        settings: Settings,
        pointer: NamespacePointer,
        registry: NamespaceRegistry,
        open_stores: OpenStores,
        databases: FoundDatabases | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self._settings = settings
        self._pointer = pointer
        self._registry = registry
        self._open = open_stores
        self._databases = databases
        self._clock = clock

    @property
    def grace(self) -> dt.timedelta:
        return dt.timedelta(seconds=self._settings.namespace_grace_seconds)

    async def active(self) -> str:
        """The namespace reads and workers use: the pointer's, or the configured one before any switch."""
        return await self._pointer.active() or self._settings.namespace

    async def entries(self) -> list[NamespaceEntry]:
        """Every recorded namespace, the registry set right from the pointer first."""
        await self._registry.activate(await self.active())
        return await self._registry.entries()

    async def others(self, besides: str) -> dict[str, NamespaceData]:
        """The stores of every recorded namespace but `besides`, by name."""
        return {
            entry.namespace: self._open(entry.namespace)
            for entry in await self._registry.entries()
            if entry.namespace != besides
        }

    async def switch(self, namespace: str, **info: Any) -> list[str]:
        """Move the pointer to `namespace` and record it active; the namespaces it retires (now `previous`)."""
        await self._pointer.switch(namespace, **info)
        return await self._registry.activate(namespace)

    async def drop(self, namespace: str) -> NamespaceEntry:
        """Delete a recorded namespace's data and forget it. Conflict for the active one, or one a live
        replay is building; NotFound for a name the registry does not hold."""
        active = await self.active()
        await self._registry.activate(active)  # the registry set right from the pointer
        entry = await self._registry.get(namespace)
        if entry is None:
            raise NotFound(f"no namespace {namespace} of {self._settings.app_id}; `memlog namespaces list` shows them")
        refused = why_not_drop(entry, active, self._clock())
        if refused is not None:
            raise Conflict(refused)
        await self._open(namespace).drop()
        await self._registry.remove(namespace)
        log.info("dropped namespace %s (%s since %s)", namespace, entry.state, entry.since.isoformat())
        return entry

    async def drop_due(self) -> list[str]:
        """Drop every namespace out of use for longer than the grace period; their names."""
        active = await self.active()
        await self._registry.activate(active)
        now = self._clock()
        dropped = []
        for entry in await self._registry.entries():
            if due_for_drop(entry, active, now, self.grace):
                try:
                    await self.drop(entry.namespace)
                except Conflict as exc:  # the pointer moved since `active` was read: it is in use again
                    log.info("namespace %s kept: %s", entry.namespace, exc)
                    continue
                dropped.append(entry.namespace)
        return dropped

    async def start(self) -> None:
        """A worker's first look: its namespace (the pointer's) recorded active, older ones found."""
        await self.entries()
        await self.adopt_found()

    async def adopt_found(self) -> list[str]:
        """Record the namespaces that hold a MongoDB database but are not recorded (made before the
        registry): the configured one and the replays' `<namespace>-r<UTC time>`. Their grace starts now."""
        if self._databases is None:
            return []
        base = self._settings.namespace
        prefix = f"{self._settings.mongo_database}_"
        ours = re.compile(rf"{re.escape(base)}(-r\d{{14}})?")
        adopted = []
        try:
            databases = await self._databases()
        except StoreRefused as exc:  # a user without listDatabases: nothing to find, nothing to stop for
            log.warning("cannot list MongoDB databases to find namespaces made before the registry: %s", exc)
            return []
        active = await self.active()
        for database in databases:
            name = database[len(prefix) :] if database.startswith(prefix) else ""
            if not (valid_name(name) and ours.fullmatch(name)) or name == active:
                continue
            if await self._registry.adopt(name, "found holding data, made before the registry"):
                adopted.append(name)
        if adopted:
            log.info("recorded namespaces found holding data: %s", ", ".join(adopted))
        return adopted


def drop_on_timer(app: Any, namespaces: Namespaces, interval: float) -> None:
    """A Faust app's timer that drops the namespaces out of use for longer than the grace period."""

    @app.timer(interval=interval)  # type: ignore[untyped-decorator]
    async def drop_namespaces_out_of_use() -> None:
        try:
            await namespaces.drop_due()
        except StoreUnavailable as exc:  # looked at again on the next tick
            log.warning("namespaces out of use not dropped now: %s", exc)
