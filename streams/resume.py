"""Every projection resumes from its own checkpoint, whatever the consumer group has committed.

Several projections read one topic (sessions, archive and fact activity all read memlog.threads),
and Faust commits one offset per partition for all of them: a stop in the middle of a batch can
leave the group's offset past what the slowest projection applied, and a worker that then starts
at the group's offset skips those events for that projection for good. So, once a rebalance is
complete and just before Faust seeks every partition to its committed offset, the group's offset
of each assigned partition is set to one past the lowest checkpoint of the projections that read
it. Each projection is idempotent by position, so the ones that are further along skip what they
already applied.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from schemas.errors import StoreUnavailable
from streams.projector import Projector

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0


class ResumeFromCheckpoints:
    """Connected to the app's `on_rebalance_complete` signal.

    Args:
        app: the Faust app whose consumer holds the assignment.
        projectors: every projector the app runs.
    """

    def __init__(self, app: Any, projectors: Sequence[Projector[Any]]) -> None:
        self._app = app
        self._by_topic: dict[str, list[Projector[Any]]] = {}
        self._marked: list[Projector[Any]] = []  # projections this marked waiting for their store
        for projector in projectors:
            self._by_topic.setdefault(projector.source_topic, []).append(projector)

    async def resume_points(self, assigned: Sequence[Any]) -> dict[Any, int]:
        """For each assigned partition some projection reads: one past its lowest checkpoint.

        A projection whose checkpoints cannot be read is marked waiting for its store until they can
        (no agent runs meanwhile, so no write of its own would say so).
        """
        points: dict[Any, int] = {}
        for tp in assigned:
            readers = self._by_topic.get(tp.topic, [])
            if readers:
                points[tp] = min([await self._checkpoint(reader, tp.partition) for reader in readers]) + 1
        for reader in self._marked:
            reader.waiting(False)
        self._marked.clear()
        return points

    async def _checkpoint(self, reader: Projector[Any], partition: int) -> int:
        try:
            return await reader.applied(partition)
        except StoreUnavailable:
            reader.waiting(True)
            if reader not in self._marked:  # the read is tried again every RETRY_SECONDS
                self._marked.append(reader)
            raise

    async def __call__(self, *_: Any, **__: Any) -> None:
        consumer = self._app.consumer
        while True:
            try:
                points = await self.resume_points(sorted(consumer.assignment()))
                break
            except StoreUnavailable as exc:  # without the checkpoints no safe start is known: wait for them
                if self._app.should_stop:
                    return
                log.warning("checkpoints unreadable, cannot resume yet: %s", exc)
                await asyncio.sleep(RETRY_SECONDS)
        if points:
            # Faust seeks to the committed offsets right after this signal (Recovery._resume_streams);
            # its consumer's raw commit is the one way to move them, backwards included. That seek
            # skips a committed offset of 0 (aiokafka's seek_to_committed), hence the seek here too.
            await consumer._commit(points)
            for tp, offset in points.items():
                await consumer.seek(tp, offset)
            log.info(
                "resuming from the projections' checkpoints: %s",
                ", ".join(f"{tp.topic}.{tp.partition}@{offset}" for tp, offset in points.items()),
            )
