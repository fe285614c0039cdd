"""A projection behind the consumer group's committed offset resumes from its own checkpoint.

Faust commits one offset per partition for every projection of a topic, so a stop mid-batch can
leave the group past what the slowest projection applied. The worker used to start at the group's
offset and that projection never saw those events again.
"""

from __future__ import annotations

import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from memlog.adapters.redis_store import thread_base
from memlog.config.settings import Settings
from memlog.dev.processes import start_api, start_worker
from projections.session import ThreadKey
from streams.topics import ensure_topics
from tests.e2e.conftest import LOGS, api_client, own_settings


async def test_a_projection_behind_the_group_offset_catches_up_after_a_restart(stack: Settings) -> None:
    settings = own_settings(stack)
    await ensure_topics(settings)
    worker = start_worker(settings, LOGS)
    api = start_api(settings, LOGS)
    try:
        async with api_client(settings) as http:
            position = ""
            for number in range(5):
                body = {"tenant": "resume", "subject": "ann", "question": f"q{number}", "answer": f"a{number}"}
                response = await http.post("/v1/exchanges", json=body)
                assert response.status_code == 202, response.text
                position = response.json()["position"]
            context = "/v1/tenants/resume/subjects/ann/context"
            assert len((await http.get(context, params={"after": position})).json()["exchanges"]) == 5
            worker.stop()

            # The state a stop mid-batch leaves: the group at the end of the partition, while the
            # sessions projection (alone of the three reading it) never applied these events.
            _, partition, offset = position.split(".")
            tp = TopicPartition(settings.threads_topic, int(partition))
            committer = AIOKafkaConsumer(
                bootstrap_servers=settings.bootstrap, group_id=settings.group_id, enable_auto_commit=False
            )
            await committer.start()
            committer.assign([tp])
            try:
                await committer.commit({tp: OffsetAndMetadata(int(offset) + 1, "")})
            finally:
                await committer.stop()
            redis = aioredis.Redis.from_url(settings.redis)
            try:
                base = thread_base(settings.redis_prefix, ThreadKey.session("resume", "ann"))
                await redis.delete(f"{base}:h", f"{base}:x", f"{base}:o")
                await redis.hset(f"{settings.redis_prefix}:applied:threads", partition, -1)  # type: ignore[misc]
            finally:
                await redis.aclose()

            worker = start_worker(settings, LOGS)
            response = await http.get(context, params={"after": position})
            assert response.status_code == 200, response.text
            assert [e["question"] for e in response.json()["exchanges"]] == [f"q{n}" for n in range(5)]
            assert "resuming from the projections' checkpoints" in worker.output()
    finally:
        api.stop()
        worker.stop()
