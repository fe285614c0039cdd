"""The event log on the real broker: topics, the producer's batches, raw consumption."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from memlog.config.settings import Settings
from memlog.services import Services
from projections.tokens import TokenCounter
from schemas.errors import ServiceSetupError
from schemas.events import AnswerGiven, QuestionAsked, ToolCalled, from_record, record_key
from schemas.exchanges import ReportedExchange, exchange_events
from schemas.session_text import added_text
from streams.topics import check_retention, ensure_topics
from tests.kafka import consume_all, delete_topics_under


async def test_topics_are_created_with_equal_partitions_and_size_limits(topics: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=topics.bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics([*topics.subject_topics, topics.deadletter_topic])
        assert {t["topic"]: len(t["partitions"]) for t in described} == {
            name: topics.partitions for name in [*topics.subject_topics, topics.deadletter_topic]
        }
        assert await ensure_topics(topics) == []  # a second run creates nothing
    finally:
        await admin.close()


async def test_a_sessions_topics_are_deleted_under_its_prefixes_only(topics: Settings, stack: Settings) -> None:
    """The suite deletes the topics of the namespaces it made (tests/conftest.py); a neighbour's stay."""
    neighbour = topics.model_copy(update={"topic_prefix": f"{topics.topic_prefix}x"})  # the prefix, longer
    await ensure_topics(neighbour)
    deleted = await delete_topics_under(stack, [topics.topic_prefix])
    assert sorted(deleted) == sorted([*topics.subject_topics, topics.deadletter_topic, topics.topic("ingest")])
    admin = AIOKafkaAdminClient(bootstrap_servers=topics.bootstrap)
    await admin.start()
    try:
        left = set(await admin.list_topics())
    finally:
        await admin.close()
    assert not left & set(deleted)
    assert {*neighbour.subject_topics, neighbour.deadletter_topic} <= left
    assert await delete_topics_under(stack, [neighbour.topic_prefix])
    assert await delete_topics_under(stack, []) == []


async def _retention(admin: AIOKafkaAdminClient, topic: str) -> str:
    (response,) = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": None})]
    )
    (resource,) = response.to_object()["resources"]
    return str(resource["config_entries"][0]["config_value"])


async def test_topics_keep_what_a_replay_needs_and_a_worker_refuses_topics_that_do_not(topics: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=topics.bootstrap)
    await admin.start()
    try:
        for name in ("threads", "facts", "privacy"):
            assert await _retention(admin, topics.topic(name)) == "-1"
        assert await _retention(admin, topics.topic("traces")) == str(round(topics.trace_days * 86_400_000))
        await check_retention(topics)  # as created: fine

        week = str(7 * 86_400_000)  # the broker's usual default, on a topic made elsewhere
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topics.topic("facts"), {"retention.ms": week})]
        )
        for _ in range(100):  # the broker applies a topic's new configuration asynchronously
            if await _retention(admin, topics.topic("facts")) == week:
                break
            await asyncio.sleep(0.1)
        with pytest.raises(ServiceSetupError, match=rf"{topics.topic('facts')} keeps records {week} ms"):
            await check_retention(topics)
    finally:
        await admin.close()


async def test_an_exchange_is_one_batch_in_order_on_its_subjects_partition(
    services: Services, count_tokens: TokenCounter
) -> None:
    settings = services.settings
    payload = {
        "tenant": "castle",
        "subject": "ann",
        "question": "q",
        "tool_calls": [{"name": "a", "result": 1}, {"name": "b", "result": 2}],
        "answer": "done",
    }
    recorded = await services.producer.record_exchange(payload)
    again = await services.producer.record_exchange({**payload, "question": "second"})
    records = await consume_all(settings, settings.threads_topic, 8)
    assert len(records) == 8
    assert {(p, k) for p, _, k, _ in records} == {(recorded.position.partition, record_key("castle", "ann"))}
    offsets = [o for _, o, _, _ in records]
    assert offsets == list(range(8))
    assert (recorded.position.offset, again.position.offset) == (3, 7)
    types = [services.codec.decode(v).full_name for *_, v in records[:4]]
    assert types == ["memlog.QuestionAsked", "memlog.ToolCalled", "memlog.ToolCalled", "memlog.AnswerGiven"]
    first = services.codec.decode(records[0][3])
    # personal fields travel sealed with the subject's data key; the routing envelope stays clear
    assert first.record["question"] == "" and first.record["envelope"]["subject"] == "ann"
    assert b"second" not in b"".join(v for *_, v in records)
    [opened] = await services.sealer.open_many([(first.full_name, first.record)])
    assert isinstance(opened, dict) and opened["question"] == "q"
    assert from_record(first.full_name, opened).exchange_id == recorded.exchange_id
    # each event carries the token count of the text it adds to the session, so no projection counts it
    decoded = [services.codec.decode(v) for *_, v in records[:4]]
    opened_all = await services.sealer.open_many([(d.full_name, d.record) for d in decoded])
    events = [from_record(d.full_name, r) for d, r in zip(decoded, opened_all, strict=True) if isinstance(r, dict)]
    exchange = [e for e in events if isinstance(e, QuestionAsked | ToolCalled | AnswerGiven)]
    assert len(exchange) == 4
    assert [e.tokens for e in exchange] == [count_tokens(added_text(e)) for e in exchange]
    assert all(e.tokens for e in exchange)


async def test_events_of_any_one_subject_always_share_a_partition(services: Services) -> None:
    positions = {}
    for tenant, subject in [("a", "x"), ("b", "x"), ("a", "y")]:
        first = await services.producer.record_exchange({"tenant": tenant, "subject": subject, "question": "1"})
        second = await services.producer.record_exchange({"tenant": tenant, "subject": subject, "question": "2"})
        assert first.position.partition == second.position.partition
        positions[(tenant, subject)] = first.position.partition
    question_only = ReportedExchange.from_payload({"tenant": "a", "subject": "x", "question": "q"})
    assert len(exchange_events(question_only, producer="p")) == 1
