"""The Faust app's Kafka consumer, as the watchdog and the fault hooks handle it.

Faust runs its aiokafka consumer on a thread of its own, with its own event loop; what is asked of
that consumer here is handed to that loop, never run on the worker's.
"""

from __future__ import annotations

from typing import Any

from aiokafka import TopicPartition
from faust.exceptions import ConsumerNotStarted


class FaustConsumer:
    def __init__(self, app: Any) -> None:
        self._app = app

    def assignment(self) -> set[tuple[str, int]]:
        """The (topic, partition) pairs the worker holds; none before the consumer has started."""
        try:
            return {(tp.topic, tp.partition) for tp in self._app.consumer.assignment()}
        except ConsumerNotStarted:
            return set()

    def restart(self) -> None:
        """Ask the group coordinator for a rejoin.

        Faust then goes through a whole rebalance, as if a worker had joined: it revokes every
        partition (dropping what its agents had buffered), assigns them again, seeks each to the
        group's offset (which streams/resume.py first moves to the projections' checkpoints), resumes
        every paused partition and starts its fetcher if it had stopped. Nothing else of the app
        restarts, so the worker keeps its clients and its place in the group.
        """
        thread = self._app.consumer._thread
        coordinator = thread._ensure_consumer()._coordinator
        thread.thread_loop.call_soon_threadsafe(coordinator.request_rejoin)

    def pause(self) -> None:
        """Stop fetching every held partition, in Faust and in aiokafka, without telling anyone (a fault hook)."""
        consumer = self._app.consumer
        held = consumer.assignment()
        consumer.pause_partitions(held)
        thread = consumer._thread
        client = thread._ensure_consumer()
        partitions = [TopicPartition(tp.topic, tp.partition) for tp in held]
        thread.thread_loop.call_soon_threadsafe(lambda: client.pause(*partitions))
