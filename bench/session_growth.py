"""Benchmark: what a session write costs Redis as the session grows, next to a raw APPEND of the same bytes.

One subject's exchanges (question, one tool call, answer: the replay bench's) are applied one event at a
time through the session step, as a live worker applies them, to a session with folds off, up to
EXCHANGES exchanges. Redis's own time per call of the write script (its `INFO commandstats`) is printed
for ranges of the session's length, beside the floor: the exchange's two ready fragments appended raw
to two strings that grow as the thread's do (the least a write of the ready context can cost Redis),
measured the same way in the same run. A write
whose cost grows with the session shows as a ratio that grows down the table.
It runs on the local stack's Redis under a prefix of its own, removed at the end; the times are the
server's, so nothing else should write to it meanwhile. `python -m bench.session_growth [EXCHANGES]`
(default 900). No assertions: the numbers are for reading.
"""

from __future__ import annotations

import sys

import redis.asyncio as aioredis

from bench.projection import on_local_stack
from bench.replay import exchange_payload
from memlog.adapters.redis_store import RedisSessionStore
from memlog.config.settings import Settings
from projections.position import Position
from projections.ready import exchange_fragments
from projections.session import ThreadKey, ThreadPolicy
from projections.tokens import TokenCounter, load_encoding
from schemas.exchanges import ReportedExchange, exchange_events
from streams.steps.sessions import SessionStep

RANGES = ((0, 50), (50, 100), (100, 150), (450, 500), (850, 900))  # (after, up to) exchanges


async def command_usec(client: aioredis.Redis, command: str) -> tuple[int, int]:
    stats = (await client.info("commandstats")).get(f"cmdstat_{command}", {"calls": 0, "usec": 0})
    return int(stats["calls"]), int(stats["usec"])


async def run(settings: Settings, exchanges: int = 900) -> None:
    count_tokens = TokenCounter(load_encoding(settings.tokenizer, settings.tokenizer_file))
    client = aioredis.Redis.from_url(settings.redis)
    prefix = f"{settings.redis_prefix}:growth"
    try:
        await measure(client, prefix, exchanges, count_tokens)
    finally:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
        await client.aclose()


async def measure(client: aioredis.Redis, prefix: str, exchanges: int, count_tokens: TokenCounter) -> None:
    store = RedisSessionStore(client, prefix)
    step = SessionStep(store, policy=ThreadPolicy(), count_tokens=count_tokens)
    edges = {edge for pair in RANGES for edge in pair}
    marks = {0: (0, await command_usec(client, "evalsha"), await command_usec(client, "append"))}
    offset = 0
    for number in range(1, exchanges + 1):
        reported = ReportedExchange.from_payload(exchange_payload("player-0001", number))
        events = exchange_events(reported, producer="bench", count_tokens=count_tokens)
        for event in events:
            await step([(event, Position("threads", 0, offset))])
            offset += 1
        session = await store.read(ThreadKey.session(reported.route.tenant, reported.route.subject))
        assert session is not None
        text, view = exchange_fragments(session.exchanges[-1])
        # the floor: the exchange's fragments appended raw to strings that grow as the thread's do
        await client.append(f"{prefix}:floor:t", text)
        await client.append(f"{prefix}:floor:v", view)
        if number in edges:
            marks[number] = (offset, await command_usec(client, "evalsha"), await command_usec(client, "append"))
    print(f"Redis's time per write, one session growing to {exchanges:,} exchanges, one write per event:")
    for low, high in RANGES:
        if high not in marks:
            continue
        w0, (_, u0), (a0, b0) = marks[low]
        w1, (_, u1), (a1, b1) = marks[high]
        script = (u1 - u0) / (w1 - w0)  # the thread's write script and its checkpoint's, per write
        floor = 2 * (b1 - b0) / max(a1 - a0, 1)  # two APPENDs (text and view)
        print(
            f"  exchanges {low + 1:4} to {high:4}: the store's scripts {script:8.1f} us"
            f"   raw APPENDs of the fragments {floor:6.1f} us   x {script / max(floor, 0.01):5.1f}"
        )


def main() -> None:
    exchanges = int(sys.argv[1]) if len(sys.argv) > 1 else 900
    on_local_stack(lambda settings: run(settings, exchanges))


if __name__ == "__main__":
    main()
