"""Applied signals: a read waiting for `after` is woken by the sessions projection's checkpoint move,
on the real Redis, and a move that changes nothing (a redelivered batch) sends nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from memlog.adapters.redis_signals import AppliedSignals, glob_escaped
from memlog.adapters.redis_store import RedisSessionStore
from memlog.config.settings import Settings
from projections.position import Position
from projections.session import SessionWrite


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[tuple[RedisSessionStore, AppliedSignals]]:
    client = aioredis.Redis.from_url(settings.redis)
    signals = AppliedSignals(client, settings.app_id)
    try:
        yield RedisSessionStore(client, settings.redis_prefix), signals
    finally:
        await signals.close()
        await client.delete(f"{settings.redis_prefix}:applied:threads")
        await client.aclose()


async def until_listening(signals: AppliedSignals, store: RedisSessionStore) -> None:
    """The subscription is made by the first waiter; moves before it is in place are not heard."""
    offset = 0
    while True:
        moved = signals.armed()
        await store.advance(Position("threads", 9, offset))
        await AppliedSignals.wait(moved, 0.05)
        if moved.is_set():
            return
        offset += 1


async def test_a_checkpoint_move_wakes_a_waiter_and_a_replayed_one_does_not(
    store: tuple[RedisSessionStore, AppliedSignals],
) -> None:
    sessions, signals = store
    assert signals.live
    await until_listening(signals, sessions)
    moved = signals.armed()
    await sessions.advance(Position("threads", 0, 5))
    await AppliedSignals.wait(moved, 30)
    assert moved.is_set()
    again = signals.armed()
    assert not again.is_set()  # the next waiter waits for the next move
    await sessions.advance(Position("threads", 0, 5))  # applied already: no move
    await sessions.advance(Position("threads", 0, 3))
    await AppliedSignals.wait(again, 0.5)
    assert not again.is_set()
    await sessions.advance(Position("threads", 0, 6))
    await asyncio.wait_for(again.wait(), 30)


def test_an_app_id_is_matched_as_it_is() -> None:
    assert glob_escaped("memlog-a*[b]?\\") == "memlog-a\\*\\[b\\]\\?\\\\"


async def test_a_write_to_a_redis_that_lost_its_scripts_loads_them_and_lands_once(
    store: tuple[RedisSessionStore, AppliedSignals],
) -> None:
    """The write pipeline calls the scripts by digest alone (no SCRIPT EXISTS before it): a NOSCRIPT
    answer (a restarted or flushed Redis) loads them and sends the pipeline again."""
    sessions, _ = store
    sessions._advance.sha = "0" * 40  # a digest Redis does not hold, as after SCRIPT FLUSH
    await sessions.write([SessionWrite(Position("threads", 1, 41))], now_ms=0)
    assert await sessions.applied("threads", 1) == 41
    assert sessions._advance.sha != "0" * 40
    await sessions.write([SessionWrite(Position("threads", 1, 40))], now_ms=0)  # redelivered: no move back
    assert await sessions.applied("threads", 1) == 41
