"""A replay's thread memory (issue 16): keeping the threads in memory across batches, and writing each
exchange's run of changes as one, builds in every store what loading them for every batch builds,
whatever happens to the store between batches (an erasure, a thread dropped)."""

from __future__ import annotations

import dataclasses
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from memlog.adapters import connections
from memlog.adapters.in_memory import InMemorySessionStore
from memlog.adapters.redis_store import RedisSessionStore
from memlog.config.settings import Settings
from projections.ports import SessionStore
from projections.position import Position
from projections.session import Exchange, SessionChange, SessionWrite, ThreadKey, ThreadPolicy, thread_key
from projections.thread_memory import ThreadMemory, coalesce
from schemas.events import ThreadEvent, now_ms
from streams.steps.sessions import SessionStep
from tests.unit.strategies import session_histories

POLICY = ThreadPolicy()
TTL = POLICY.session_ttl_ms
DISTURBANCES = st.sampled_from(["none", "erase", "drop-session", "drop-public"])


def words(text: str) -> int:
    return len(text.split())


async def disturb(store: SessionStore, how: str) -> None:
    """What may happen to the target between two batches of a replay."""
    if how == "erase":
        await store.erase_subject("t", "s")  # the session goes, and the subject's lines on the public thread
    elif how == "drop-session":
        await store.drop(ThreadKey.session("t", "s"))
    elif how == "drop-public":
        await store.drop(ThreadKey.public("t"))


async def build(
    store: SessionStore, events: list[ThreadEvent], batch: int, now: int, memory: ThreadMemory | None, how: str, at: int
) -> None:
    step = SessionStep(store, policy=POLICY, count_tokens=words, memory=memory, clock=lambda: now)
    positioned = [(event, Position("threads", 0, offset)) for offset, event in enumerate(events)]
    for number, start in enumerate(range(0, len(positioned), batch)):
        if number == at:
            await disturb(store, how)
        await step(positioned[start : start + batch])


async def agree(kept: SessionStore, loaded: SessionStore, events: list[ThreadEvent]) -> None:
    for key in {thread_key(event) for event in events}:
        assert await kept.read(key) == await loaded.read(key)
        ready, expected = await kept.read_ready(key), await loaded.read_ready(key)
        assert (ready is None) == (expected is None)
        if ready is not None and expected is not None:
            assert ready.exchanges_json == expected.exchanges_json
            assert ready.rendered_json == expected.rendered_json
            assert ready.version == expected.version


@given(session_histories(TTL), st.integers(1, 8), DISTURBANCES, st.integers(0, 6))
@settings(max_examples=200, deadline=None)
async def test_in_memory_kept_threads_build_what_loading_each_batch_builds(
    events: list[ThreadEvent], batch: int, how: str, at: int
) -> None:
    now = events[-1].envelope.occurred_at
    stores = []
    for memory in (ThreadMemory(), None):
        store = InMemorySessionStore()
        store.now_ms = now
        await build(store, events, batch, now, memory, how, at)
        stores.append(store)
    await agree(*stores, events)


def _shifted(events: list[ThreadEvent], to: int) -> list[ThreadEvent]:
    """The events moved in time so that the first is at `to` (Redis expires keys by its own clock)."""
    delta = to - events[0].envelope.occurred_at
    return [
        dataclasses.replace(
            event, envelope=dataclasses.replace(event.envelope, occurred_at=event.envelope.occurred_at + delta)
        )
        for event in events
    ]


@given(session_histories(TTL), st.integers(1, 8), DISTURBANCES, st.integers(0, 6))
@settings(max_examples=40, deadline=None)
async def test_in_redis_kept_threads_build_what_loading_each_batch_builds(
    stack: Settings, events: list[ThreadEvent], batch: int, how: str, at: int
) -> None:
    now = now_ms()
    events = _shifted(events, now + 60_000)  # nothing expires by the clock while the test runs
    client = connections.redis_client(stack)
    prefix = f"test-memory-{uuid.uuid4().hex[:8]}"
    try:
        kept, loaded = RedisSessionStore(client, f"{prefix}-kept"), RedisSessionStore(client, f"{prefix}-loaded")
        memory = ThreadMemory()
        await build(kept, events, batch, now, memory, how, at)
        await build(loaded, events, batch, now, None, how, at)
        await agree(kept, loaded, events)
        if how == "none":
            # what the next batch's check compares: with nothing done to the store outside the replay, the
            # version the memory expects of each thread it keeps is the store's
            held = await kept.versions(sorted({thread_key(event) for event in events}))
            for key, version in held.items():
                if key in memory:
                    assert memory.version(key) == version
    finally:
        async for key in client.scan_iter(match=f"{prefix}-*", count=500):
            await client.delete(key)
        await client.aclose()


def test_a_full_memory_lets_everything_go() -> None:
    memory = ThreadMemory(limit=1)
    key = ThreadKey.session("t", "s")
    memory.check({key: None})  # the store holds none of it: kept from now on
    assert key in memory
    writes = [
        SessionWrite(Position("threads", 0, n), key, SessionChange(Exchange(f"x{n}", "q"), False, 1, 1, 10**15))
        for n in range(2)
    ]
    memory.remember(writes, {key: None}, 0)
    assert key not in memory and len(memory) == 0


def test_only_a_run_of_one_exchange_in_a_kept_thread_is_made_one_change() -> None:
    kept, other = ThreadKey.session("t", "a"), ThreadKey.session("t", "b")

    def write(offset: int, key: ThreadKey, exchange_id: str, expires_at: int = 10**15) -> SessionWrite:
        change = SessionChange(
            Exchange(exchange_id, str(offset)), offset == 0, offset, offset, expires_at, count_delta=1
        )
        return SessionWrite(Position("threads", 0, offset), key, change)

    writes = [
        write(0, kept, "x"),
        write(1, other, "x"),
        write(2, kept, "x"),
        write(3, kept, "y"),
        write(4, kept, "y", 5),
    ]
    out = coalesce(writes, {kept}, now_ms=10)
    assert [w.change is None for w in out] == [True, False, False, False, False]
    merged = out[2].change
    assert merged is not None and merged.exchange is not None
    assert (merged.reset, merged.token_delta, merged.count_delta, merged.exchange.question) == (True, 2, 2, "2")
    assert out[1] == writes[1] and out[3] == writes[3] and out[4] == writes[4]  # another thread; an expired change
