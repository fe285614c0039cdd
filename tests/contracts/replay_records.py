"""The ReplayRecords contract, run against every implementation.

The contract suite; the test module test_replay_records.py runs it against each adapter."""

from __future__ import annotations

from projections.ports import ReplayRecords


class ReplayRecordsContract:
    async def test_a_record_reads_back_and_is_replaced_whole(self, records: ReplayRecords) -> None:
        assert await records.get("r1") is None
        await records.save("r1", {"replay_id": "r1", "state": "running", "events": 3, "total": None})
        assert await records.get("r1") == {"replay_id": "r1", "state": "running", "events": 3, "total": None}
        await records.save("r1", {"replay_id": "r1", "state": "done", "namespace": "n1"})
        assert await records.get("r1") == {"replay_id": "r1", "state": "done", "namespace": "n1"}

    async def test_running_lists_only_running_records(self, records: ReplayRecords) -> None:
        await records.save("r1", {"replay_id": "r1", "state": "done"})
        await records.save("r2", {"replay_id": "r2", "state": "running", "heartbeat_ms": 5})
        await records.save("r3", {"replay_id": "r3", "state": "failed", "error": "x"})
        assert await records.running() == [{"replay_id": "r2", "state": "running", "heartbeat_ms": 5}]
