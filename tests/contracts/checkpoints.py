"""The Checkpoints contract, run against every implementation.

The contract suite; the test module test_checkpoints.py runs it against each adapter."""

from __future__ import annotations

from collections.abc import Callable

from projections.ports import Checkpoints
from projections.position import Position

Open = Callable[[str], Checkpoints]  # the checkpoints of a projection, over the same stored ones


class CheckpointsContract:
    async def test_nothing_is_applied_at_first(self, open_checkpoints: Open) -> None:
        assert await open_checkpoints("archive").applied("threads", 0) == -1

    async def test_checkpoints_only_move_forward(self, open_checkpoints: Open) -> None:
        checkpoints = open_checkpoints("archive")
        await checkpoints.advance(Position("threads", 1, 9))
        await checkpoints.advance(Position("threads", 1, 3))
        assert await checkpoints.applied("threads", 1) == 9
        await checkpoints.advance(Position("threads", 1, 10))
        assert await checkpoints.applied("threads", 1) == 10

    async def test_partitions_and_topics_are_apart(self, open_checkpoints: Open) -> None:
        checkpoints = open_checkpoints("archive")
        await checkpoints.advance(Position("threads", 1, 9))
        assert await checkpoints.applied("threads", 0) == -1
        assert await checkpoints.applied("facts", 1) == -1

    async def test_projections_reading_one_topic_keep_their_own_checkpoints(self, open_checkpoints: Open) -> None:
        await open_checkpoints("archive").advance(Position("threads", 0, 9))
        await open_checkpoints("facts-activity").advance(Position("threads", 0, 4))
        assert await open_checkpoints("archive").applied("threads", 0) == 9
        assert await open_checkpoints("facts-activity").applied("threads", 0) == 4

    async def test_several_partitions_advance_in_one_call_and_still_only_forward(self, open_checkpoints: Open) -> None:
        checkpoints = open_checkpoints("archive")
        await checkpoints.advance(Position("threads", 2, 50))
        many = getattr(checkpoints, "advance_many")  # noqa: B009 (not part of the protocol: offered by these)
        await many([Position("threads", 0, 7), Position("threads", 1, 3), Position("threads", 2, 40)])
        await many([Position("threads", 1, 2)])
        assert [await checkpoints.applied("threads", p) for p in range(4)] == [7, 3, 50, -1]
        assert await open_checkpoints("facts-activity").applied("threads", 0) == -1

    async def test_several_partitions_are_read_in_one_call(self, open_checkpoints: Open) -> None:
        checkpoints = open_checkpoints("archive")
        await checkpoints.advance(Position("threads", 2, 50))
        await checkpoints.advance(Position("threads", 0, 7))
        await open_checkpoints("facts-activity").advance(Position("threads", 1, 4))
        await checkpoints.advance(Position("facts", 1, 9))
        many = getattr(checkpoints, "applied_many")  # noqa: B009 (not part of the protocol: offered by these)
        assert await many("threads", [2, 1, 0, 3]) == [50, -1, 7, -1]
        assert await many("threads", []) == []
