"""Replays started by an operator over HTTP, run as tasks of the API process and followed by id."""

from __future__ import annotations

import asyncio
import io
import logging
import uuid
from typing import TYPE_CHECKING, Any

from config.settings import Settings
from schemas.errors import Conflict

if TYPE_CHECKING:
    from streams.replay import Progress

log = logging.getLogger(__name__)


def projections_named(projection: str) -> tuple[str, ...]:
    """The projections a replay rebuilds: one by its name, or all of them."""
    # imported here: streams.worker brings Faust in, which only a replay needs
    from streams.worker import PROJECTIONS

    return PROJECTIONS if projection == "all" else (projection,)


class Replays:
    """The replays of this process, one running at a time; their state is lost when the process ends."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._runs: dict[str, dict[str, Any]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._progress: dict[str, Progress] = {}

    def start(
        self, projection: str, *, since: int | None, switch: bool, workers: int | None, requested_by: str
    ) -> dict[str, Any]:
        """Rebuild projections from the topics into a fresh namespace (all tenants); Conflict while one runs."""
        if any(item["state"] == "running" for item in self._runs.values()):
            raise Conflict("a replay is running already; follow it at GET /v1/replays/{replay_id}")
        replay_id = str(uuid.uuid4())
        self._runs[replay_id] = {"replay_id": replay_id, "state": "running", "events": 0, "total": None}
        which = projections_named(projection)
        run = self._run(replay_id, which, since=since, switch=switch, workers=workers, requested_by=requested_by)
        self._tasks[replay_id] = asyncio.create_task(run)
        return {"replay_id": replay_id, "state": "running"}

    def status(self, replay_id: str) -> dict[str, Any] | None:
        """What a replay has done so far; None for one this process did not start."""
        item = self._runs.get(replay_id)
        if item is None:
            return None
        view = dict(item)
        progress = self._progress.get(replay_id)
        if progress is not None and item["state"] == "running":
            view.update(events=progress.done, total=progress.total)
        return view

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

        try:
            report = await replay(
                self._settings,
                which,
                since_ms=since,
                switch=switch,
                out=io.StringIO(),
                requested_by=requested_by,
                watch=watch,
                workers=workers,
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
                skipped_because=sorted(set(report.reasons.values())),
            )
        except Exception as exc:  # reported to the operator who follows the replay
            log.exception("replay %s failed", replay_id)
            item.update(state="failed", error=f"{type(exc).__name__}: {exc}")
