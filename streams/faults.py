"""Test hooks that make a worker stall the ways Faust workers are known to (MEMLOG_WORKER_FAULT_SIGNALS).

Off unless the setting is on. SIGUSR1 stops the consumer fetching (faust-streaming issues #166,
#549: a consumer that stops and says nothing); a consumer restart cures it. SIGUSR2 hangs every
agent before its next batch, as a call that never returns would; only a new process cures it.
"""

from __future__ import annotations

import asyncio
import logging

from streams.consumer import FaustConsumer

log = logging.getLogger(__name__)


class FaultHooks:
    def __init__(self, consumer: FaustConsumer) -> None:
        self._consumer = consumer
        self._flowing = asyncio.Event()
        self._flowing.set()

    def stop_fetching(self) -> None:
        log.warning("fault hook: the consumer stops fetching")
        self._consumer.pause()

    def hang_agents(self) -> None:
        log.warning("fault hook: every agent hangs before its next batch")
        self._flowing.clear()

    async def before_batch(self) -> None:
        await self._flowing.wait()
