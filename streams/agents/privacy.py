"""The privacy agent: SubjectErased and SubjectExportRequested on memlog.privacy."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from memlog.metrics import Metrics
from memlog.privacy import SubjectData, erase, export
from projections.position import Position
from projections.stores import Checkpoints
from schemas.events import PrivacyEvent, SubjectErased
from streams.projector import advance_past

log = logging.getLogger(__name__)


class PrivacyStep:
    """Runs each request in log order; both are idempotent by request id, so redelivery repeats nothing."""

    def __init__(self, data: SubjectData, checkpoints: Checkpoints, metrics: Metrics | None = None) -> None:
        self._data = data
        self._checkpoints = checkpoints
        self._metrics = metrics

    async def __call__(self, events: Sequence[tuple[PrivacyEvent, Position]]) -> None:
        for event, _ in events:
            env = event.envelope
            assert env.subject is not None  # validated by the event
            if isinstance(event, SubjectErased):
                entry = await erase(self._data, env.tenant, env.subject, event.request_id, event.requested_by)
                log.info("erased %s/%s: %s", env.tenant, env.subject, entry.get("deleted"))
                if self._metrics is not None:
                    self._metrics.erasures.inc()
            else:
                await export(self._data, env.tenant, env.subject, event.request_id, event.requested_by)
        await advance_past(self._checkpoints, events)
