"""Batches of a Faust agent's stream handed over as soon as nothing more is coming (issue 38).

Faust's `take_events(n, within)` hands a batch over only when it holds `n` events or its window ends,
and wakes every `within` seconds while idle: a read with `after=` waits out the window behind every
write. `ready_batches` takes the events already queued, up to `most`, and hands them over at once; while
the caller applies a batch the next one gathers in the queue, so a busy projection still gets large
batches. Nothing waits on a timer, and an idle agent sleeps on its queue.

Faust's consumer puts the records of one fetch on the agents' queues one at a time, each a few turns of
the event loop after the last, so an empty queue does not yet mean the fetch is all there: a batch is
handed over once the queue has stayed empty for FETCH_TURNS turns of the loop, at most FETCH_SECONDS (an
exchange's three records made two or three batches, and a read waited for the last, without them).

The other projections (archive, facts activity, traces, privacy) may wait longer and gain larger batches:
with `within`, a batch is handed over `within` seconds after its FIRST event at the earliest (or when it holds
`most`). The window starts only when an event arrives, so an idle agent still sleeps on its queue instead of
waking every `within` seconds as `take_events` does (issue 38: that waking was most of an idle worker's CPU).

Acks are the caller's contract, as with `take_events`: a batch's events are acked when the loop asks
for the next batch, after the projection's store write and checkpoint; never for a batch the caller
left (a worker stopping): those are applied again, by position, by the next worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

FETCH_TURNS = 8  # with 8, the three records of an exchange came as one batch in 65 of 65 idle turns
# and at most this long: on a busy loop 8 turns can take tens of ms, and the batch is large by then anyway
FETCH_SECONDS = 0.002


async def more_coming(queue: Any) -> bool:
    """Whether another event is queued now, or within FETCH_TURNS turns of the event loop (at most
    FETCH_SECONDS)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + FETCH_SECONDS
    for _ in range(FETCH_TURNS):
        if not queue.empty():
            return True
        if loop.time() >= until:
            return False
        await asyncio.sleep(0)  # one turn: the consumer delivers the fetch's next record, if any
    return not queue.empty()


async def gathering(queue: Any, until: float, loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the batch takes more: an event is queued, or the window (to `until`) is still open and
    the batch waits it out once, or one comes within FETCH_TURNS turns."""
    if not queue.empty():
        return True
    left = until - loop.time()
    if left > 0:
        await asyncio.sleep(left)  # one timer per batch, none while idle
    return await more_coming(queue)


async def ready_batches(stream: Any, most: int, within: float = 0.0) -> AsyncIterator[list[Any]]:
    """The stream's events (Faust `EventT`s) in batches of at most `most`: what is queued, or comes
    within a few loop turns, when its last event is taken, and not before `within` seconds after its first."""
    queue = stream.channel.queue  # the agent's own queue, the one the stream takes from
    stream.enable_acks = False  # acked below, once the batch is applied
    loop = asyncio.get_running_loop()
    events: list[Any] = []
    until = 0.0
    async for _ in stream:
        event = stream.current_event
        if event is None:  # not an event of the topic (a value put on the channel): nothing to ack
            continue
        if not events:
            until = loop.time() + within
        events.append(event)
        if len(events) < most and await gathering(queue, until, loop):
            continue
        yield events
        for done in events:
            await stream.ack(done)
        events = []
