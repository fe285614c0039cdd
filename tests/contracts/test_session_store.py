"""The SessionStore contract, run against every implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from adapters.in_memory import InMemorySessionStore
from adapters.redis_store import RedisSessionStore
from config.settings import Settings
from projections.ports import SessionStore, ThreadKey
from projections.position import Position
from projections.session import Exchange, SessionChange, SessionHead, SessionWrite, ThreadPolicy, apply_event
from projections.tokens import TokenCounter
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent, now_ms
from streams.steps.sessions import SessionStep

TTL = 3_600_000
KEY = ThreadKey.session("castle", "ann")


def _env(at: int, tenant: str = "castle") -> Envelope:
    return Envelope(tenant=tenant, subject="ann", thread="session", producer="test", occurred_at=at)


class SessionStoreContract:
    """Subclasses provide `store` and `clock` (the store's notion of now, epoch ms)."""

    @pytest.fixture
    def clock(self) -> int:
        return now_ms()

    async def _apply(
        self,
        store: SessionStore,
        event: ThreadEvent,
        offset: int,
        now: int,
        count: TokenCounter,
        key: ThreadKey = KEY,
        partition: int = 0,
    ) -> bool:
        loaded = await store.load([(key, event.exchange_id)])
        head, exchange = loaded[(key, event.exchange_id)]
        change = apply_event(head, exchange, event, ttl_ms=TTL, count_tokens=count)
        assert change is not None
        (applied,) = await store.write([SessionWrite(Position("threads", partition, offset), key, change)], now)
        return applied

    async def test_a_written_exchange_reads_back_whole(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        await self._apply(store, QuestionAsked(_env(clock), "x1", "where?"), 0, clock, count_tokens)
        await self._apply(store, AnswerGiven(_env(clock), "x1", "there"), 1, clock, count_tokens)
        session = await store.read(KEY)
        assert session is not None
        (exchange,) = session.exchanges
        assert (exchange.question, exchange.answer) == ("where?", "there")
        assert session.head.tokens == exchange.tokens > 0
        assert session.head.last_question_at == clock

    async def test_a_position_already_applied_is_not_applied_twice(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        question = QuestionAsked(_env(clock), "x1", "where?")
        assert await self._apply(store, question, 5, clock, count_tokens)
        change = SessionChange(Exchange("x2", "other"), False, 7, clock, clock + TTL, count_delta=1)
        again = [
            SessionWrite(Position("threads", 0, 5), KEY, change),
            SessionWrite(Position("threads", 0, 4), KEY, change),
        ]
        assert await store.write(again, clock) == [False, False]
        session = await store.read(KEY)
        assert session is not None and [e.exchange_id for e in session.exchanges] == ["x1"]

    async def test_a_batch_redelivered_after_a_partial_write_applies_each_event_once(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        bob = ThreadKey.session("castle", "bob")
        bob_env = Envelope(tenant="castle", subject="bob", thread="session", producer="test", occurred_at=clock)
        batch: list[tuple[ThreadEvent, Position]] = [
            (QuestionAsked(_env(clock), "x1", "where?"), Position("threads", 0, 3)),
            (QuestionAsked(bob_env, "y1", "when?"), Position("threads", 0, 4)),
            (AnswerGiven(_env(clock), "x1", "there"), Position("threads", 0, 5)),
            (AnswerGiven(bob_env, "y1", "now"), Position("threads", 0, 6)),
        ]
        step = SessionStep(store, policy=ThreadPolicy(), count_tokens=count_tokens)
        await step(batch[:2])  # the first half landed, then the worker died before committing
        await step(batch)  # the whole batch comes again
        ann_session, bob_session = await store.read(KEY), await store.read(bob)
        assert ann_session is not None and bob_session is not None
        assert [(e.exchange_id, e.question, e.answer) for e in ann_session.exchanges] == [("x1", "where?", "there")]
        assert [(e.exchange_id, e.question, e.answer) for e in bob_session.exchanges] == [("y1", "when?", "now")]
        assert ann_session.head.tokens == count_tokens("where?") + count_tokens("there")
        assert (ann_session.head.count, bob_session.head.count) == (1, 1)
        assert await store.applied("threads", 0) == 6
        # and once more: every position is applied already, nothing changes
        changes = [SessionChange(Exchange("x9", "late"), False, 5, clock, clock + TTL, count_delta=1)] * 4
        writes = [
            SessionWrite(position, key, change)
            for (_, position), key, change in zip(batch, [KEY, bob, KEY, bob], changes, strict=True)
        ]
        assert await store.write(writes, clock) == [False, False, False, False]
        assert await store.read(KEY) == ann_session

    async def test_a_write_without_a_change_only_advances_the_checkpoint(self, store: SessionStore, clock: int) -> None:
        assert await store.write([SessionWrite(Position("threads", 1, 7))], clock) == [True]
        assert await store.applied("threads", 1) == 7
        assert await store.read(KEY) is None

    async def test_loading_a_missing_session_gives_nothing(self, store: SessionStore) -> None:
        assert await store.load([(KEY, "x1"), (KEY, "x2")]) == {(KEY, "x1"): (None, None), (KEY, "x2"): (None, None)}

    async def test_checkpoints_only_move_forward(self, store: SessionStore) -> None:
        assert await store.applied("threads", 3) == -1
        await store.advance(Position("threads", 3, 10))
        await store.advance(Position("threads", 3, 4))
        assert await store.applied("threads", 3) == 10
        assert await store.applied("threads", 2) == -1

    async def test_a_write_advances_the_checkpoint_of_its_partition(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        await self._apply(store, QuestionAsked(_env(clock), "x1", "q"), 41, clock, count_tokens, partition=2)
        assert await store.applied("threads", 2) == 41

    async def test_an_already_expired_change_is_not_written(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        old = clock - TTL - 1000
        assert await self._apply(store, QuestionAsked(_env(old), "x1", "q"), 0, clock, count_tokens)
        assert await store.read(KEY) is None
        assert await store.applied("threads", 0) == 0

    async def test_exchanges_keep_their_first_arrival_order(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        for offset, exchange_id in enumerate(["b", "a", "c"]):
            await self._apply(store, QuestionAsked(_env(clock), exchange_id, "q"), offset, clock, count_tokens)
        await self._apply(store, AnswerGiven(_env(clock), "a", "done"), 3, clock, count_tokens)
        session = await store.read(KEY)
        assert session is not None
        assert [e.exchange_id for e in session.exchanges] == ["b", "a", "c"]

    async def test_tenants_do_not_share_a_subject(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        other = ThreadKey.session("castle:2", "ann")
        await self._apply(store, QuestionAsked(_env(clock), "x1", "mine"), 0, clock, count_tokens)
        await self._apply(
            store, QuestionAsked(_env(clock, "castle:2"), "x1", "theirs"), 1, clock, count_tokens, key=other
        )
        mine, theirs = await store.read(KEY), await store.read(other)
        assert mine is not None and theirs is not None
        assert [e.question for e in mine.exchanges] == ["mine"]
        assert [e.question for e in theirs.exchanges] == ["theirs"]

    async def test_a_reset_change_starts_the_session_afresh(self, store: SessionStore, clock: int) -> None:
        await store.write(
            [
                SessionWrite(
                    Position("threads", 0, 0),
                    KEY,
                    SessionChange(Exchange("x1", "old", tokens=3), False, 3, clock, clock + TTL, count_delta=1),
                ),
                SessionWrite(
                    Position("threads", 0, 1),
                    KEY,
                    SessionChange(Exchange("x2", "new", tokens=2), True, 2, clock, clock + TTL, count_delta=1),
                ),
            ],
            clock,
        )
        session = await store.read(KEY)
        assert session is not None
        assert [e.exchange_id for e in session.exchanges] == ["x2"]
        assert session.head == SessionHead(last_question_at=clock, tokens=2, count=1)

    async def test_a_fold_replaces_exchanges_by_the_summary(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        for offset, exchange_id in enumerate(["a", "b", "c"]):
            await self._apply(
                store, QuestionAsked(_env(clock), exchange_id, f"question {exchange_id}"), offset, clock, count_tokens
            )
        before = await store.read(KEY)
        assert before is not None
        folded = [e for e in before.exchanges if e.exchange_id in ("a", "b")]
        change = SessionChange(
            None,
            False,
            5 - sum(e.tokens for e in folded),
            clock,
            clock + TTL,
            remove=("a", "b"),
            summary="asked a and b",
            summary_tokens=5,
            count_delta=-2,
        )
        assert await store.write([SessionWrite(Position("threads", 0, 3), KEY, change)], clock) == [True]
        session = await store.read(KEY)
        assert session is not None
        assert [e.exchange_id for e in session.exchanges] == ["c"]
        assert session.head.summary == "asked a and b" and session.head.summary_tokens == 5
        assert session.head.count == 1
        assert session.head.tokens == before.head.tokens - sum(e.tokens for e in folded) + 5

    async def test_drop_removes_the_session(self, store: SessionStore, clock: int, count_tokens: TokenCounter) -> None:
        await self._apply(store, QuestionAsked(_env(clock), "x1", "q"), 0, clock, count_tokens)
        await store.drop(KEY)
        assert await store.read(KEY) is None


class TestInMemorySessionStore(SessionStoreContract):
    @pytest.fixture
    def store(self, clock: int) -> SessionStore:
        store = InMemorySessionStore()
        store.now_ms = clock
        return store


class TestRedisSessionStore(SessionStoreContract):
    @pytest.fixture
    async def store(self, settings: Settings) -> AsyncIterator[SessionStore]:
        client = aioredis.Redis.from_url(settings.redis)
        yield RedisSessionStore(client, settings.redis_prefix)
        async for key in client.scan_iter(match=f"{settings.redis_prefix}:*"):
            await client.delete(key)
        await client.aclose()

    async def test_the_session_expires_at_its_remaining_ttl(
        self, store: SessionStore, settings: Settings, clock: int, count_tokens: TokenCounter
    ) -> None:
        # asked 59m58s ago with a 1 h TTL: a replay gives it only what remains
        await self._apply(store, QuestionAsked(_env(clock - TTL + 2000), "x1", "q"), 0, clock, count_tokens)
        client = aioredis.Redis.from_url(settings.redis)
        remaining = [await client.pttl(k) async for k in client.scan_iter(match=f"{settings.redis_prefix}:session:*")]
        await client.aclose()
        assert remaining and all(0 < ms <= 2000 for ms in remaining)
