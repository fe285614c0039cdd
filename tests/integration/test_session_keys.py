"""Names that hold the key layout's separators and suffixes never reach another thread's keys.

Each case was a way to break another subject's session, or every tenant's projection, when a
thread key was its names joined by ':' plus a ':ex' or ':order' suffix.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

from memlog.adapters.redis_store import RedisSessionStore, lines_index, thread_base
from memlog.config.settings import Settings
from projections.ports import ThreadKey
from projections.position import Position
from projections.session import SessionWrite, apply_event
from projections.tokens import TokenCounter
from schemas.events import AUTOMATION_THREAD, SESSION_THREAD, Envelope, QuestionAsked, now_ms

TTL = 3_600_000
SUFFIXES = ("h", "x", "o", "ex", "order")


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[RedisSessionStore]:
    client = aioredis.Redis.from_url(settings.redis)
    yield RedisSessionStore(client, settings.redis_prefix)
    async for key in client.scan_iter(match=f"{settings.redis_prefix}:*"):
        await client.delete(key)
    await client.aclose()


class Writer:
    def __init__(self, store: RedisSessionStore, count: TokenCounter) -> None:
        self.store, self.count, self.offset = store, count, 0

    async def ask(self, key: ThreadKey, question: str, *, subject: str | None = None, at: int | None = None) -> None:
        at = now_ms() if at is None else at
        agent = key.owner if key.thread == AUTOMATION_THREAD else None
        who = key.owner if key.thread == SESSION_THREAD else subject
        env = Envelope(tenant=key.tenant, subject=who, agent=agent, thread=key.thread, producer="test", occurred_at=at)
        event = QuestionAsked(env, f"x{self.offset}", question)
        loaded = await self.store.load([(key, event.exchange_id)])
        head, exchange = loaded[(key, event.exchange_id)]
        change = apply_event(head, exchange, event, ttl_ms=TTL, count_tokens=self.count)
        assert change is not None
        await self.store.write([SessionWrite(Position("threads", 0, self.offset), key, change)], now_ms())
        self.offset += 1

    async def questions(self, key: ThreadKey) -> list[str]:
        session = await self.store.read(key)
        return [] if session is None else [e.question for e in session.exchanges]


@given(
    st.tuples(st.sampled_from(["session", "public", "automation"]), st.text(max_size=6), st.text(max_size=6)),
    st.tuples(st.sampled_from(["session", "public", "automation"]), st.text(max_size=6), st.text(max_size=6)),
    st.sampled_from(SUFFIXES[:3]),
    st.sampled_from(SUFFIXES[:3]),
)
def test_no_two_threads_share_a_key(a: tuple[str, str, str], b: tuple[str, str, str], sa: str, sb: str) -> None:
    first, second = ThreadKey(a[1], a[0], a[2]), ThreadKey(b[1], b[0], b[2])
    if (first, sa) != (second, sb):
        assert f"{thread_base('p', first)}:{sa}" != f"{thread_base('p', second)}:{sb}"
        assert f"{thread_base('p', first)}:{sa}" != lines_index("p", b[1], b[2])


@pytest.mark.parametrize("suffix", SUFFIXES)
async def test_a_subject_named_like_another_subjects_key_writes_beside_them(
    store: RedisSessionStore, count_tokens: TokenCounter, suffix: str
) -> None:
    writer = Writer(store, count_tokens)
    vic, alias = ThreadKey.session("castle", "vic"), ThreadKey.session("castle", f"vic:{suffix}")
    await writer.ask(vic, "vic's question")
    await writer.ask(alias, "the alias's question")  # WRONGTYPE here stalled every tenant's sessions
    await writer.ask(vic, "vic again")
    assert await writer.questions(vic) == ["vic's question", "vic again"]
    assert await writer.questions(alias) == ["the alias's question"]


@pytest.mark.parametrize("suffix", SUFFIXES)
async def test_a_back_dated_alias_neither_expires_nor_erases_another_subject(
    store: RedisSessionStore, count_tokens: TokenCounter, suffix: str
) -> None:
    writer = Writer(store, count_tokens)
    bob, alias = ThreadKey.session("castle", "bob"), ThreadKey.session("castle", f"bob:{suffix}")
    await writer.ask(bob, "bob's question")
    await writer.ask(alias, "nearly expired", at=now_ms() - TTL + 500)  # its keys expire in half a second
    await store.erase_subject("castle", f"bob:{suffix}")
    assert await writer.questions(bob) == ["bob's question"]
    ttls = [await store._redis.pttl(k) for k in await store._redis.keys(f"{thread_base(store._prefix, bob)}:*")]
    assert ttls and all(ms > TTL - 60_000 for ms in ttls)


@pytest.mark.parametrize("agent", [f"zz:{suffix}" for suffix in SUFFIXES] + ["zz}", "{zz", "1:zz"])
async def test_an_agent_named_like_a_key_suffix_leaves_erasure_working(
    store: RedisSessionStore, count_tokens: TokenCounter, agent: str
) -> None:
    writer = Writer(store, count_tokens)
    zz, odd = ThreadKey.automation("castle", "zz"), ThreadKey.automation("castle", agent)
    await writer.ask(zz, "wake zz", subject="carol")
    await writer.ask(odd, "wake the odd one", subject="carol")
    await writer.ask(odd, "someone else", subject="dave")
    erased = await store.erase_subject("castle", "carol")  # a script error here stopped every erasure
    assert erased["shared_thread_lines"] == 2
    assert await writer.questions(zz) == []
    assert await writer.questions(odd) == ["someone else"]


async def test_erasure_finds_a_subjects_shared_lines_from_the_index_not_from_key_names(
    store: RedisSessionStore, count_tokens: TokenCounter
) -> None:
    writer = Writer(store, count_tokens)
    public, bot = ThreadKey.public("castle"), ThreadKey.automation("castle", "bot")
    await writer.ask(public, "erin asks in public", subject="erin")
    await writer.ask(bot, "erin wakes the bot", subject="erin")
    await writer.ask(bot, "frank wakes the bot", subject="frank")
    exported = await store.export_subject("castle", "erin")
    assert sorted(line["question"] for line in exported["shared_thread_lines"]) == [
        "erin wakes the bot",
        "erin: erin asks in public",  # public questions start with the asker's name
    ]
    assert (await store.erase_subject("castle", "erin"))["shared_thread_lines"] == 2
    assert await writer.questions(bot) == ["frank wakes the bot"]
    assert await store._redis.exists(lines_index(store._prefix, "castle", "erin")) == 0
