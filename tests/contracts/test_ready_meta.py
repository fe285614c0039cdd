"""The Redis session store's read meta (`m`, issue 16): a context read is one MGET of the ready texts,
views, meta and served mark, trusted when the meta is in this store's format and names the lengths of
the texts and views. These tests hold every writer to keeping it current: after each kind of write the
read is served from the meta (a fallback fails the test) and equals the thread read from its exchanges,
whatever the ids, summaries and answers hold (the meta's JSON separators, escapes, NUL, other planes,
empty and enormous values); and a meta that is missing, stale or foreign is never served."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlog.adapters import connections
from memlog.adapters.redis_store import STORED_FORMAT, RedisSessionStore, served_key, thread_base
from memlog.config.settings import Settings
from projections.folded import Folded
from projections.position import Position
from projections.ready import ReadyThread
from projections.session import Exchange, Segment, SessionChange, SessionWrite, ThreadKey, ToolCall
from projections.traces import Served
from schemas.events import now_ms

# redis-py's cluster client closes its node connections without waiting for their sockets, which
# Python reports, after the test, as an unclosed stream; nothing leaks while the client is in use.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

TTL = 3_600_000
# what JSON, the meta's layout or Lua's cjson could trip on, and text from every plane (lone surrogates
# never reach a store: UTF-8 cannot hold them, and the API's JSON parser refuses them)
TRICKY = st.sampled_from(list('"\\/\n\r\t\x00\x01\x7f:,[]{}é€😀\u2028 ab'))
NASTY = st.text(TRICKY | st.characters(codec="utf-8"), max_size=12)
IDS = NASTY.filter(bool)  # an exchange id is never empty (the API makes one)
# who asks on the shared thread, has a part of its summary, and is erased (empty: no one)
SUBJECTS = st.sampled_from(["ann", 'b"o\\b', "", "é😀\n,:", "seg:", "ask:x"])


async def _fast(store: RedisSessionStore, key: ThreadKey) -> ReadyThread | None:
    """The read served from the meta alone: a fallback to the exchanges fails."""

    async def fell_back(*_: Any, **__: Any) -> ReadyThread | None:
        raise AssertionError("the read fell back to the exchanges: the meta was not current")

    store._ready_from_exchanges = fell_back  # type: ignore[method-assign]
    try:
        return await store.read_ready(key)
    finally:
        del store._ready_from_exchanges


async def _agrees(store: RedisSessionStore, key: ThreadKey, *, fast: bool = True) -> None:
    """The ready read (from the meta alone when `fast`) is the thread read from its exchanges, at the
    version `versions` reports; and a second read is served from the meta."""
    session = await store.read(key)
    version = (await store.versions([key]))[key]
    if session is None:  # nothing to serve, and no meta to serve it from
        assert await store.read_ready(key) is None and version is None
        return
    ready = await (_fast(store, key) if fast else store.read_ready(key))
    assert ready is not None and version is not None
    assert ready == ReadyThread.of_session(key, session, version)
    assert ready.version == version
    assert await _fast(store, key) == ready


@pytest.fixture(params=["redis", "cluster"])
async def store(request: pytest.FixtureRequest, settings: Settings) -> AsyncIterator[RedisSessionStore]:
    if request.param == "cluster":
        url = request.getfixturevalue("redis_cluster")
        settings = settings.model_copy(update={"redis_url": url, "redis_cluster": True})
    client = connections.redis_client(settings)
    yield RedisSessionStore(client, settings.redis_prefix)
    async for key in client.scan_iter(match=f"{settings.redis_prefix}:*", count=1000):
        await client.delete(key)
    await client.aclose()


def _change(exchange: Exchange | None, at: int, **fields: Any) -> SessionChange:
    return SessionChange(exchange, False, 1, at, at + TTL, count_delta=1 if exchange else 0, **fields)


async def _write(store: RedisSessionStore, offset: int, key: ThreadKey, *changes: SessionChange) -> int:
    writes = [SessionWrite(Position("threads", 0, offset + n), key, change) for n, change in enumerate(changes)]
    await store.write(writes, now_ms())
    return offset + len(changes)


# one step of a thread's life, as the writers make it
_steps = st.one_of(
    st.tuples(st.just("ask"), IDS, SUBJECTS),  # a new exchange, or an update of one
    st.tuples(st.just("answer"), st.integers(0, 30), NASTY),  # an update of a held one (the newest, or a middle one)
    st.tuples(st.just("fold"), st.integers(0, 30), NASTY),  # exchanges folded into a summary
    st.tuples(st.just("part"), SUBJECTS, NASTY),  # an asker's part of a shared thread's summary (empty: dropped)
    st.tuples(st.just("batch"), st.lists(IDS, min_size=1, max_size=4), NASTY),  # a replay's batch, one call
    st.tuples(st.just("expired"), IDS, NASTY),  # a change already expired: not written
    st.tuples(st.just("reset"), st.none(), st.none()),
    st.tuples(st.just("erase"), SUBJECTS, st.none()),  # a subject's erasure: their lines leave the shared thread
    st.tuples(st.just("served"), st.none(), st.none()),
)


@given(st.lists(_steps, min_size=1, max_size=10))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_every_write_keeps_the_read_meta_current(store: RedisSessionStore, steps: list[Any]) -> None:
    key = ThreadKey.public(f"t-{uuid.uuid4().hex[:8]}")  # shared: it has lines of subjects and summary parts
    at, offset = now_ms(), 0
    held: list[Exchange] = []
    for kind, first, second in steps:
        fast = True
        if kind == "ask":
            exchange = Exchange(first, first + second, occurred_at=at, tokens=1, subject=second or None)
            offset = await _write(store, offset, key, _change(exchange, at))
            held = [e for e in held if e.exchange_id != first] + [exchange]
        elif kind == "answer" and held:
            target = held[first % len(held)]
            call = ToolCall(0, second, json.dumps(second), "null", True, None, at)  # unanswered: pending
            offset = await _write(store, offset, key, _change(replace(target, answer=second, tool_calls=(call,)), at))
        elif kind == "fold" and held:
            gone = tuple(e.exchange_id for e in held[: first % len(held) + 1])
            fold = _change(None, at, remove=gone, summary=second, folded=Folded("extractive", len(gone), 1, at, at))
            offset = await _write(store, offset, key, fold)
            held = held[len(gone) :]
        elif kind == "part":
            part = Segment(first or None, second, len(second), at + offset)
            offset = await _write(store, offset, key, _change(None, at, segment=part))
        elif kind == "batch":
            # the same exchange again and again in one call: a change may carry a later one's form
            changes = [_change(Exchange(i, second + str(n), occurred_at=at, tokens=1), at) for n, i in enumerate(first)]
            offset = await _write(store, offset, key, *changes)
            for i in first:
                held = [e for e in held if e.exchange_id != i] + [Exchange(i)]
        elif kind == "expired":
            gone = SessionChange(Exchange(first, second), False, 1, at - 2 * TTL, at - TTL, count_delta=1)
            offset = await _write(store, offset, key, gone)
        elif kind == "reset":
            offset = await _write(store, offset, key, SessionChange(None, True, 0, at, at + TTL, summary=""))
            held = []
        elif kind == "erase":
            erased = await store.erase_subject(key.tenant, first)
            held = [e for e in held if (e.subject or "") != first or not first]
            fast = not any(erased.values())  # an erasure of lines drops the ready context: made afresh
        elif kind == "served":
            await store.mark_served({key: Served(b"", at + TTL)})
        await _agrees(store, key, fast=fast)


async def test_enormous_and_empty_values_are_served_from_the_meta(store: RedisSessionStore) -> None:
    key, at = ThreadKey.session("castle", "ann"), now_ms()
    offset = await _write(store, 0, key, _change(Exchange("e", "", occurred_at=at), at))  # an empty question
    await _agrees(store, key)
    big = '\u00e9"\\\n' * 300_000 + "😀" * 100_000
    offset = await _write(store, offset, key, _change(Exchange("x" * 10_000, big, answer=big), at))
    await _agrees(store, key)
    offset = await _write(store, offset, key, _change(None, at, remove=("e",), summary=big, summary_tokens=3))
    await _agrees(store, key)
    offset = await _write(store, offset, key, _change(None, at, remove=("x" * 10_000,), summary=""))
    await _agrees(store, key)  # no exchange left: empty texts and views, still one MGET


async def test_a_thread_without_exchanges_or_with_a_head_only_change_reads_from_the_meta(
    store: RedisSessionStore,
) -> None:
    key, at = ThreadKey.public("castle"), now_ms()
    offset = await _write(store, 0, key, _change(None, at, segment=Segment("ann", "ann's part", 2, at)))
    await _agrees(store, key)
    offset = await _write(store, offset, key, _change(Exchange("p1", "q"), at))
    await _agrees(store, key)
    # a change to the head alone leaves the texts and views as they were: only the meta tells it
    await _write(store, offset, key, _change(None, at, segment=Segment("ann", "ann's other", 2, at)))
    ready = await _fast(store, key)
    assert ready is not None and [s.text for s in ready.head.segments] == ["ann's other"]
    await _agrees(store, key)


async def test_an_erasure_of_lines_is_served_from_the_meta_at_its_new_version(store: RedisSessionStore) -> None:
    key, at = ThreadKey.public("castle"), now_ms()
    asks = [_change(Exchange(f"p{n}", "q", subject=who), at) for n, who in enumerate(["ann", "bob", "ann"])]
    await _write(store, 0, key, *asks, _change(None, at, segment=Segment("ann", "ann's part", 2, at)))
    await _agrees(store, key)
    before = (await store.versions([key]))[key]
    assert await store.erase_subject("castle", "ann") == {
        "session_exchanges": 0,
        "shared_thread_lines": 2,
        "shared_thread_summaries": 1,
    }
    await _agrees(store, key, fast=False)  # the erasure dropped the ready context: made afresh, then kept
    ready = await _fast(store, key)
    assert ready is not None and ready.exchange_ids == ("p1",) and ready.head.segments == ()
    assert ready.version != before and ready.version == (await store.versions([key]))[key]


async def test_a_missing_stale_or_foreign_meta_is_never_served(store: RedisSessionStore) -> None:
    key, at = ThreadKey.session("castle", "bob"), now_ms()
    base = thread_base(store._prefix, key)
    offset = await _write(store, 0, key, _change(Exchange("x1", "q1"), at), _change(Exchange("x2", "q2"), at))
    await _agrees(store, key)
    client = store._redis
    meta = await client.get(f"{base}:m")
    assert meta is not None and json.loads(meta)[0] == STORED_FORMAT
    for broken in (
        None,  # a thread written by the memlog before the meta
        meta.replace(STORED_FORMAT.encode(), b"2", 1),  # another format
        b"not json",
        b'{"a": 1}',
        b"[1, 2]",
    ):
        if broken is None:
            await client.delete(f"{base}:m")
        else:
            await client.set(f"{base}:m", broken, keepttl=True)
        await _agrees(store, key, fast=False)  # served from the exchanges, and the meta made afresh
    # texts or views changed behind the meta's back (their lengths disagree): not served
    await client.append(f"{base}:t", b"x")
    await _agrees(store, key, fast=False)
    await client.append(f"{base}:v", b",{}")
    await _agrees(store, key, fast=False)
    # the memlog before the meta drops texts and views when it finds the ready context in another format
    await client.hset(f"{base}:h", "pos", offset)  # type: ignore[misc]
    await client.rpush(f"{base}:o", "x3")  # type: ignore[misc]
    await client.hset(f"{base}:x", "x3", Exchange("x3", "by an older writer").to_json())  # type: ignore[misc]
    await client.delete(f"{base}:t", f"{base}:v")
    await _agrees(store, key, fast=False)
    assert await client.pexpiretime(f"{base}:m") == await client.pexpiretime(f"{base}:h") > 0


async def test_the_meta_lives_and_goes_with_its_thread(store: RedisSessionStore) -> None:
    key, at = ThreadKey.session("castle", "cat"), now_ms()
    base = thread_base(store._prefix, key)
    await _write(store, 0, key, _change(Exchange("x1", "q1"), at))
    await store.mark_served({key: Served(b'{"exchange_id":"x1","run_id":"r","expires_at":0}\n', at + 2 * TTL)})
    await _agrees(store, key)
    client = store._redis
    expiries = {await client.pexpiretime(f"{base}:{part}") for part in "hxortvm"}
    assert expiries == {at + TTL}
    ready = await _fast(store, key)
    assert ready is not None and ready.served
    await store.drop(key)
    assert await _held(store, key) == {served_key(store._prefix, key)}
    assert await store.read_ready(key) is None
    await _write(store, 10, key, _change(Exchange("x2", "q2"), at))
    await store.erase_subject("castle", "cat")
    assert await _held(store, key) == set()
    # one left behind by an older memlog's erasure (it knew no meta) goes with the next read
    await _write(store, 20, key, _change(Exchange("x3", "q3"), at))
    await client.delete(*store._keys(key)[:6])
    assert await store.read_ready(key) is None
    assert await _held(store, key) == set()


async def _held(store: RedisSessionStore, key: ThreadKey) -> set[str]:
    """Which of the thread's keys Redis holds."""
    names = [*store._keys(key), served_key(store._prefix, key)]
    return {name for name in names if await store._redis.exists(name)}


async def test_an_expired_thread_takes_its_meta_with_it(store: RedisSessionStore) -> None:
    key, at = ThreadKey.session("castle", "dan"), now_ms()
    base = thread_base(store._prefix, key)
    await _write(store, 0, key, SessionChange(Exchange("x1", "q"), False, 1, at - TTL, at + 3000, count_delta=1))
    await _agrees(store, key)
    assert 0 < await store._redis.pttl(f"{base}:m") <= 3000
    for _ in range(200):
        if await store._redis.exists(f"{base}:h") == 0:
            break
        await asyncio.sleep(0.05)
    assert await store.read_ready(key) is None
    assert await _held(store, key) == set()
