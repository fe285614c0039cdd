"""The event log on the real broker: topics, the producer's batches, raw consumption."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient

from config.settings import Settings
from memlog.services import Services
from schemas.events import from_record, record_key
from schemas.exchanges import ReportedExchange, exchange_events
from streams.topics import ensure_topics
from tests.kafka import consume_all


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


async def test_an_exchange_is_one_batch_in_order_on_its_subjects_partition(services: Services) -> None:
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


async def test_events_of_any_one_subject_always_share_a_partition(services: Services) -> None:
    positions = {}
    for tenant, subject in [("a", "x"), ("b", "x"), ("a", "y")]:
        first = await services.producer.record_exchange({"tenant": tenant, "subject": subject, "question": "1"})
        second = await services.producer.record_exchange({"tenant": tenant, "subject": subject, "question": "2"})
        assert first.position.partition == second.position.partition
        positions[(tenant, subject)] = first.position.partition
    question_only = ReportedExchange.from_payload({"tenant": "a", "subject": "x", "question": "q"})
    assert len(exchange_events(question_only, producer="p")) == 1
