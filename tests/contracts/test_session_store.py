"""The SessionStore contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlog.adapters.connections import redis_client
from memlog.adapters.in_memory import InMemorySessionStore
from memlog.adapters.redis_store import STORED_FORMAT, RedisSessionStore, lines_index, thread_base
from memlog.config.settings import Settings
from projections.ports import SessionStore, ThreadKey
from projections.position import Position
from projections.session import (
    Exchange,
    Session,
    SessionChange,
    SessionHead,
    SessionWrite,
)
from projections.tokens import TokenCounter
from schemas.events import QuestionAsked
from tests.contracts.session_store import KEY, TTL, SessionStoreContract, envelope


class TestInMemorySessionStore(SessionStoreContract):
    @pytest.fixture
    def store(self, clock: int) -> SessionStore:
        store = InMemorySessionStore()
        store.now_ms = clock
        return store


class TestRedisSessionStore(SessionStoreContract):
    @pytest.fixture
    async def store(self, settings: Settings) -> AsyncIterator[SessionStore]:
        client = redis_client(settings)
        yield RedisSessionStore(client, settings.redis_prefix)
        async for key in client.scan_iter(match=f"{settings.redis_prefix}:*"):
            await client.delete(key)
        await client.aclose()

    async def test_an_askers_lines_index_lives_as_long_as_the_shared_thread_they_wrote_in(
        self, store: SessionStore, settings: Settings, clock: int
    ) -> None:
        """Others keep a shared thread alive long after someone's last line: erasure must still find it."""
        public = ThreadKey.public("castle")
        early = SessionChange(
            Exchange("p1", "ann", tokens=1, subject="ann"), False, 1, clock, clock + 60_000, count_delta=1
        )
        late = SessionChange(
            Exchange("p2", "bob", tokens=1, subject="bob"), False, 1, clock, clock + TTL, count_delta=1
        )
        await store.write([SessionWrite(Position("threads", 0, 0), public, early)], clock)
        await store.write([SessionWrite(Position("threads", 0, 1), public, late)], clock)
        client = redis_client(settings)
        try:
            ann_index = await client.pttl(lines_index(settings.redis_prefix, "castle", "ann"))
            thread = await client.pttl(f"{thread_base(settings.redis_prefix, public)}:h")
        finally:
            await client.aclose()
        assert TTL - 5_000 < thread <= ann_index <= TTL  # never without an expiry, never before the thread
        assert (await store.erase_subject("castle", "ann"))["shared_thread_lines"] == 1

    async def test_the_session_expires_at_its_remaining_ttl(
        self, store: SessionStore, settings: Settings, clock: int, count_tokens: TokenCounter
    ) -> None:
        # asked 59m58s ago with a 1 h TTL: a replay gives it only what remains
        await self.apply_plan(store, QuestionAsked(envelope(clock - TTL + 2000), "x1", "q"), 0, clock, count_tokens)
        client = redis_client(settings)
        remaining = [await client.pttl(k) async for k in client.scan_iter(match=f"{settings.redis_prefix}:{{session:*")]
        await client.aclose()
        assert remaining and all(0 < ms <= 2000 for ms in remaining)

    async def test_a_session_stored_before_loss_notices_reads_and_renders_as_before(
        self, store: SessionStore, settings: Settings, clock: int
    ) -> None:
        base = thread_base(settings.redis_prefix, KEY)
        old = {"summary": "an old summary", "stokens": "3", "tokens": "3", "count": "0", "last_q": str(clock)}
        client = redis_client(settings)
        try:
            await client.hset(f"{base}:h", mapping={**old, "pos": "0"})  # type: ignore[misc]
            await client.pexpire(f"{base}:h", TTL)
        finally:
            await client.aclose()
        held = await store.read(KEY)
        assert held is not None and held.head.folded is None
        assert held.render(KEY) == Session(SessionHead(summary="an old summary")).render()
        assert held.render(KEY) == "Summary of the earlier conversation:\nan old summary\n\n"

    async def _kept_ready(self, store: SessionStore) -> None:
        if self.old_layout:
            return
        assert isinstance(store, RedisSessionStore)
        head, _, _, ready, _, _, _ = store._keys(KEY)
        client = store._redis
        assert await client.hget(ready, "fmt") == STORED_FORMAT.encode()
        assert await client.hget(ready, "pos") == await client.hget(head, "pos")

    old_layout = False

    async def test_a_thread_stored_without_a_ready_context_is_served_and_made_ready(
        self, store: SessionStore, settings: Settings, clock: int
    ) -> None:
        self.old_layout = True
        later = clock + TTL
        await self._change(
            store, 0, clock, SessionChange(Exchange("x1", "q1", tokens=1), False, 1, clock, later, count_delta=1)
        )
        base = thread_base(settings.redis_prefix, KEY)
        client = redis_client(settings)
        try:
            # as a thread written before issue 16
            await client.delete(f"{base}:r", f"{base}:t", f"{base}:v", f"{base}:m")
            await self._change(
                store, 1, clock, SessionChange(Exchange("x2", "q2", tokens=1), False, 1, clock, later, count_delta=1)
            )
            ready_keys = (f"{base}:r", f"{base}:t", f"{base}:v", f"{base}:m")
            assert await client.exists(*ready_keys) == 0  # not kept: it would be partial
            await self._ready_agrees(store)  # served from the exchanges, and made ready
            assert await client.exists(*ready_keys) == 4
            await self._change(
                store, 2, clock, SessionChange(Exchange("x3", "q3", tokens=1), False, 1, clock, later, count_delta=1)
            )
            await self._ready_agrees(store)
            assert await client.hget(f"{base}:r", "pos") == await client.hget(f"{base}:h", "pos") == b"2"
            # the ready context lives exactly as long as the thread
            expiries = {await client.pexpiretime(f"{base}:{part}") for part in "hxortvm"}
            assert expiries == {later}
            # one written behind the head by the memlog before the read's meta, which finds the ready
            # context in another format and drops its texts and views, is neither served nor kept
            await client.hset(f"{base}:h", mapping={"pos": 3})
            await client.rpush(f"{base}:o", "x4")
            await client.hset(f"{base}:x", "x4", Exchange("x4", "by an old writer").to_json())
            await client.delete(f"{base}:r", f"{base}:t", f"{base}:v")
            await self._ready_agrees(store)
            assert await client.exists(*ready_keys) == 4
            await self._change(
                store, 4, clock, SessionChange(Exchange("x5", "q5", tokens=1), False, 1, clock, later, count_delta=1)
            )
            session = await store.read(KEY)
            assert session is not None and [e.exchange_id for e in session.exchanges] == ["x1", "x2", "x3", "x4", "x5"]
            await self._ready_agrees(store)
            await store.erase_subject("castle", "ann")
            assert [key async for key in client.scan_iter(match=f"{base}*")] == []
        finally:
            await client.aclose()


# redis-py's cluster client closes its node connections without waiting for their sockets, which
# Python reports, after the test, as an unclosed stream; nothing leaks while the client is in use.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
class TestRedisClusterSessionStore(TestRedisSessionStore):
    """The same contract on a 3-master Redis Cluster (`MEMLOG_REDIS_CLUSTER=true`): every key of a
    thread, and every key one script or transaction touches, in one hash slot."""

    @pytest.fixture
    def settings(self, settings: Settings, redis_cluster: str) -> Settings:
        return settings.model_copy(update={"redis_url": redis_cluster, "redis_cluster": True})
