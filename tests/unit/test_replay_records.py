"""Replays started through the API keep their status in the ReplayRecords store: a new API process
(here a new Replays over the same records) still answers for them."""

from __future__ import annotations

import time

import pytest

from memlog.adapters.in_memory import InMemoryReplayLease, InMemoryReplayRecords
from memlog.app.replays import Replays
from memlog.config.settings import Settings
from memlog.services import open_backends
from projections.replays import STALE_SECONDS, alive, shown
from schemas.errors import Conflict

NOW = 1_795_000_000_000


def test_a_running_record_without_a_fresh_heartbeat_shows_interrupted() -> None:
    record = {"replay_id": "r1", "state": "running", "events": 5, "heartbeat_ms": NOW}
    assert alive(record, NOW + int(STALE_SECONDS * 1000)) and shown(record, NOW)["state"] == "running"
    late = shown(record, NOW + int(STALE_SECONDS * 1000) + 1)
    assert not alive(record, NOW + int(STALE_SECONDS * 1000) + 1)
    assert late["state"] == "interrupted" and late["events"] == 5 and "heartbeat_ms" not in late
    assert shown({"replay_id": "r2", "state": "done"}, NOW) == {"replay_id": "r2", "state": "done"}


async def test_a_status_outlives_the_process_and_a_live_replay_elsewhere_holds_off_another() -> None:
    records = InMemoryReplayRecords()
    await records.save("done-1", {"replay_id": "done-1", "state": "done", "namespace": "n1", "heartbeat_ms": 1})
    restarted = Replays(Settings(), records, InMemoryReplayLease(), open_backends)
    assert await restarted.status("done-1") == {"replay_id": "done-1", "state": "done", "namespace": "n1"}
    assert await restarted.status("never") is None
    now = int(time.time() * 1000)
    await records.save("elsewhere", {"replay_id": "elsewhere", "state": "running", "heartbeat_ms": now})
    with pytest.raises(Conflict):
        await restarted.start("facts", since=None, switch=False, workers=None, requested_by="op")
    await records.save("elsewhere", {"replay_id": "elsewhere", "state": "running", "heartbeat_ms": 1})
    status = await restarted.status("elsewhere")
    assert status is not None and status["state"] == "interrupted"


async def test_a_replay_the_cli_runs_holds_off_one_through_the_api() -> None:
    """Issue 41: the CLI's replay holds the lease the API's takes too; the API answers Conflict (409)."""
    lease = InMemoryReplayLease()
    await lease.take("cli:1", "replay into n2 by cli")
    replays = Replays(Settings(), InMemoryReplayRecords(), lease, open_backends)
    with pytest.raises(Conflict) as refused:
        await replays.start("facts", since=None, switch=False, workers=None, requested_by="op")
    assert "by cli" in str(refused.value)
    assert await lease.holder() == "cli:1"
