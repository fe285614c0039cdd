"""Applied signals: a Redis channel per checkpoint hash, on which the session store's ADVANCE script
publishes each move of a partition's checkpoint, so a read waiting for `after` wakes when the sessions
projection applies a position instead of polling for it (memlog/adapters/redis_scripts.py, ADVANCE)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0  # a lost subscription is made again this long after; waiters poll meanwhile


class AppliedSignals:
    """One subscription per process to every checkpoint channel (`<prefix>:applied:<topic>`), shared by
    all waiters: `wait` returns at the next move of any checkpoint after `armed`, or after `seconds`. A
    waiter checks its checkpoints again either way, so a message lost (a reconnect, Redis Cluster,
    where this client has no pub/sub) only costs the waiter's fallback delay.

    Args:
        client: a redis.asyncio client; a cluster client gives no signals (waiters poll).
        app_id: MEMLOG_APP_ID: the checkpoints of its namespaces are heard, another app's are not.
    """

    def __init__(self, client: aioredis.Redis, app_id: str) -> None:
        self._client = client
        self._pattern = f"{glob_escaped(app_id)}:*:applied:*"  # RedisSessionStore's `<app_id>:<namespace>:applied:`
        self._moved = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._enabled = not isinstance(client, RedisCluster)

    @property
    def live(self) -> bool:
        """Whether the subscription is being kept (else waiters rely on their timeouts alone)."""
        return self._enabled

    def armed(self) -> asyncio.Event:
        """The event the next move sets: taken before a waiter checks its checkpoints, so that a move
        between its check and its wait is not missed."""
        if self._enabled and self._task is None:
            self._task = asyncio.create_task(self._listen(), name="memlog-applied-signals")
        return self._moved

    @staticmethod
    async def wait(moved: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await moved.wait()

    def _wake(self) -> None:
        """Every waiter of now wakes; later waiters wait for the next move."""
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    async def _listen(self) -> None:
        while True:
            try:
                async with self._client.pubsub() as pubsub:
                    await pubsub.psubscribe(self._pattern)
                    async for message in pubsub.listen():
                        if message.get("type") == "pmessage":
                            self._wake()
            except RedisError as exc:
                log.warning("applied signals lost (%s); waiters poll until they are back", exc)
                await asyncio.sleep(RETRY_SECONDS)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def glob_escaped(text: str) -> str:
    """`text` matched as it is in a Redis glob pattern."""
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in text)
