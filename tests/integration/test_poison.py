"""A write a store refuses for what it holds is poison: dead-lettered, and the partition moves on.

Only an outage is worth waiting for; a record that can never be written used to be retried for ever,
which stopped every later event of its partition (and every tenant sharing it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from memlog.adapters import connections
from memlog.adapters.redis_store import thread_base
from memlog.adapters.wiring import make_codec, open_stores
from memlog.config.settings import Settings
from projections.session import ThreadKey
from schemas.events import AnswerGiven, Envelope, QuestionAsked, to_record
from streams.metrics import Metrics
from streams.projector import Record
from streams.projectors import build_projections
from tests.dead_letters import Letters


@pytest.fixture
async def redis(settings: Settings) -> AsyncIterator[aioredis.Redis]:
    client = connections.redis_client(settings)
    yield client
    async for key in client.scan_iter(match=f"{settings.redis_prefix}:*"):
        await client.delete(key)
    await client.aclose()


async def test_a_write_redis_refuses_is_dead_lettered_and_the_next_exchange_is_applied(
    settings: Settings, redis: aioredis.Redis
) -> None:
    mongo = connections.mongo(settings)
    codec = make_codec(settings)
    try:
        stores = open_stores(settings, redis, mongo, settings.namespace)
        letters = Letters()
        built = build_projections(
            settings,
            codec=codec,
            sealer=None,  # type: ignore[arg-type]
            stores=stores,
            dead_letters=letters,
            metrics=Metrics(),
            which=("sessions",),
        )
        ((_, projector),) = built.projectors
        broken, fine = ThreadKey.session("castle", "mallory"), ThreadKey.session("castle", "ann")
        # something that is not a hash where the broken thread's head belongs: every write there fails
        await redis.set(f"{thread_base(settings.redis_prefix, broken)}:h", "not a hash")

        def env(subject: str) -> Envelope:
            return Envelope(tenant="castle", subject=subject, thread="session", producer="test")

        events = [
            QuestionAsked(env("mallory"), "x1", "refused"),
            QuestionAsked(env("ann"), "x2", "kept"),
            AnswerGiven(env("ann"), "x2", "yes"),
        ]
        records = [Record(0, n, None, codec.encode(e.TYPE, to_record(e))) for n, e in enumerate(events)]
        await projector.handle(records)

        assert len(letters.sent) == 1
        letter = codec.decode(letters.sent[0]).record
        assert letter["source_offset"] == 0 and "WRONGTYPE" in letter["error"]
        session = await stores.sessions.read(fine)
        assert session is not None and [(e.question, e.answer) for e in session.exchanges] == [("kept", "yes")]
        assert await stores.sessions.applied("threads", 0) == 2
    finally:
        await mongo.close()
        codec.close()
