"""A batch's gathering window (streams/batches.py, issue 38): it starts with the batch's first event.

The archive, facts activity, traces and privacy agents batch for MEMLOG_BATCH_SECONDS from a batch's first
event: what arrives inside that window joins the batch, and an empty queue with the window past hands it
over. No timer runs before the first event (an idle agent sleeps on its queue).
"""

from __future__ import annotations

import asyncio

from streams.batches import gathering


async def test_an_event_arriving_inside_the_window_joins_the_batch() -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[int] = asyncio.Queue()
    loop.call_later(0.01, queue.put_nowait, 1)
    assert await gathering(queue, loop.time() + 0.2, loop)
    assert queue.qsize() == 1


async def test_with_the_window_past_an_empty_queue_hands_the_batch_over() -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[int] = asyncio.Queue()
    assert not await gathering(queue, loop.time() - 1.0, loop)


async def test_a_queued_event_is_taken_without_waiting_out_the_window() -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[int] = asyncio.Queue()
    queue.put_nowait(1)
    task = asyncio.ensure_future(gathering(queue, loop.time() + 3600.0, loop))
    await asyncio.sleep(0)
    assert task.done() and task.result()
