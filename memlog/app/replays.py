"""Replays started by an operator over HTTP, run as tasks of the API process and followed by id.

Their records are kept in the shared privacy database (port ReplayRecords; rules in
projections/replays.py), so a replay's status is still there when the API restarts or another API
process is asked; one whose process ended mid-replay shows `interrupted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from memlog.config.settings import Settings
from projections.ports import ReplayLease, ReplayRecords
from projections.replays import HEARTBEAT_SECONDS, alive, shown
from schemas.errors import Conflict

if TYPE_CHECKING:
    from streams.rebuild import OpenBackends
    from streams.replay import Progress

log = logging.getLogger(__name__)


def projections_named(projection: str) -> tuple[str, ...]:
    """The projections a replay rebuilds: one by its name, or all of them."""
    # imported here: streams.worker brings Faust in, which only a replay needs
    from streams.projectors import PROJECTIONS

    return PROJECTIONS if projection == "all" else (projection,)


def now_ms() -> int:
    return int(time.time() * 1000)


class Replays:
    """The replays started through the API, one running at a time across the API's processes."""

    def __init__(
        self, settings: Settings, records: ReplayRecords, lease: ReplayLease, open_backends: OpenBackends
    ) -> None:
        """`open_backends`: the composition root's, which opens a replay's own clients."""
        self._settings = settings
        self._records = records
        self._lease = lease
        self._open_backends = open_backends
        self._runs: dict[str, dict[str, Any]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._progress: dict[str, Progress] = {}

    async def start(
        self, projection: str, *, since: int | None, switch: bool, workers: int | None, requested_by: str
    ) -> dict[str, Any]:
        """Rebuild projections from the topics into a fresh namespace (all tenants); Conflict while one runs."""
        busy = any(item["state"] == "running" for item in self._runs.values())
        if busy or any(alive(record, now_ms()) for record in await self._records.running()):
            raise Conflict("a replay is running already; follow it at GET /v1/replays/{replay_id}")
        which = projections_named(projection)
        replay_id = str(uuid.uuid4())
        # the lease a CLI replay takes too (DESIGN, "One replay at a time"): Conflict while one holds it
        await self._lease.take(replay_id, f"replay {replay_id} by {requested_by} through the API")
        item: dict[str, Any] = {
            "replay_id": replay_id,
            "state": "running",
            "projections": list(which),
            "events": 0,
            "total": None,
            "requested_by": requested_by,
            "started_ms": now_ms(),
        }
        self._runs[replay_id] = item
        await self._save(replay_id)
        run = self._run(replay_id, which, since=since, switch=switch, workers=workers, requested_by=requested_by)
        self._tasks[replay_id] = asyncio.create_task(run)
        return {"replay_id": replay_id, "state": "running"}

    async def status(self, replay_id: str) -> dict[str, Any] | None:
        """What a replay has done so far; None for one never started through the API."""
        if replay_id in self._runs:
            return shown(self._current(replay_id), now_ms())
        record = await self._records.get(replay_id)
        return None if record is None else shown(record, now_ms())

    def _current(self, replay_id: str) -> dict[str, Any]:
        """This process's record of a replay it runs, with the progress seen last and a fresh heartbeat."""
        item = dict(self._runs[replay_id])
        progress = self._progress.get(replay_id)
        if progress is not None and item["state"] == "running":
            item.update(events=progress.done, total=progress.total)
        item["heartbeat_ms"] = now_ms()
        return item

    async def _save(self, replay_id: str) -> None:
        await self._records.save(replay_id, self._current(replay_id))

    async def _beat(self, replay_id: str) -> None:
        """Keep the stored record fresh while the replay runs; a store away for a while is logged."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await self._save(replay_id)
            except Exception:  # the replay goes on; the record catches up at the next beat
                log.warning("replay %s: its record could not be saved", replay_id, exc_info=True)

    async def _run(
        self,
        replay_id: str,
        which: tuple[str, ...],
        *,
        since: int | None,
        switch: bool,
        workers: int | None,
        requested_by: str,
    ) -> None:
        from streams.replay import replay

        item = self._runs[replay_id]

        def watch(progress: Progress) -> None:
            self._progress[replay_id] = progress

        beat = asyncio.create_task(self._beat(replay_id))
        try:
            report = await replay(
                self._settings,
                which,
                open_backends=self._open_backends,
                since_ms=since,
                switch=switch,
                out=io.StringIO(),
                requested_by=requested_by,
                watch=watch,
                workers=workers,
                lease_holder=replay_id,
            )
            item.update(
                state="done",
                namespace=report.namespace,
                previous=report.previous,
                projections=list(report.projections),
                events=report.events,
                seconds=round(report.seconds, 3),
                switched=report.switched,
                skipped_events=sum(report.skipped.values()),
                expired_events=sum(report.expired.values()),
                skipped_because=sorted(set(report.reasons.values())),
            )
        except Exception as exc:  # reported to the operator who follows the replay
            log.exception("replay %s failed", replay_id)
            item.update(state="failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            with contextlib.suppress(Exception):  # a replay that failed before it took the lease over
                await self._lease.release(replay_id)
        for attempt in range(5):  # the outcome must reach the store, or the record turns `interrupted`
            try:
                await self._save(replay_id)
                return
            except Exception:
                log.warning("replay %s: its outcome could not be saved (attempt %d)", replay_id, attempt + 1)
                await asyncio.sleep(HEARTBEAT_SECONDS)
