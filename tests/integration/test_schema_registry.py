"""The Confluent wire format against a real Confluent-compatible registry (Apicurio Registry, ccompat API)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from memlog.config.settings import Settings
from memlog.dev.localstack import SchemaRegistry
from memlog.services import make_codec
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import from_record, to_record
from schemas.exchanges import ReportedExchange, exchange_events
from schemas.registry import HttpSchemaRegistry
from tests.kafka import consume_all


@pytest.fixture(scope="module")
def registry_url(stack: Settings) -> Iterator[str]:
    service = SchemaRegistry(stack)
    started = service.start()
    try:
        yield service.url()
    finally:
        if started:
            service.stop()


def test_events_use_the_confluent_framing_and_decode_in_a_fresh_consumer(registry_url: str) -> None:
    producer_codec = Codec(Catalog(), HttpSchemaRegistry(registry_url))
    events = exchange_events(
        ReportedExchange.from_payload(
            {
                "tenant": "t",
                "subject": "s",
                "question": "q",
                "tool_calls": [{"name": "n", "result": [1, 2]}],
                "answer": "a",
            }
        ),
        producer="test",
    )
    encoded = [producer_codec.encode(e.TYPE, to_record(e)) for e in events]
    ids = set()
    for data in encoded:
        magic, schema_id = struct.unpack(">bI", data[:5])
        assert magic == 0
        ids.add(schema_id)
    assert len(ids) == 3  # one registered schema per event type (RecordNameStrategy)
    # a consumer that never registered anything resolves the ids through the registry
    consumer_codec = Codec(Catalog(), HttpSchemaRegistry(registry_url))
    decoded = [consumer_codec.decode(data) for data in encoded]
    assert [from_record(d.full_name, d.record) for d in decoded] == events
    producer_codec.close()
    consumer_codec.close()
    # and a consumer without a registry still reads single-object bytes
    plain = Codec(Catalog())
    assert plain.decode(plain.encode(events[0].TYPE, to_record(events[0]))).full_name == events[0].TYPE


def test_registering_the_same_schema_again_returns_the_same_id(registry_url: str) -> None:
    registry = HttpSchemaRegistry(registry_url)
    canonical = Catalog().writer("memlog.QuestionAsked").canonical
    try:
        first = registry.register("memlog.QuestionAsked", canonical)
        assert registry.register("memlog.QuestionAsked", canonical) == first
    finally:
        registry.close()


async def test_the_producer_writes_confluent_framed_events_to_kafka(registry_url: str, stack: Settings) -> None:
    from memlog.services import open_services
    from streams.topics import ensure_topics
    from tests.conftest import unique_settings

    settings = unique_settings(stack, schema_registry_url=registry_url)
    await ensure_topics(settings)
    async with open_services(settings, producer=True) as services:
        await services.producer.record_exchange({"tenant": "t", "subject": "s", "question": "q", "answer": "a"})
    records = await consume_all(settings, settings.threads_topic, 2)
    assert [value[0] for *_, value in records] == [0, 0]
    codec = make_codec(settings)
    try:
        assert [codec.decode(value).full_name for *_, value in records] == [
            "memlog.QuestionAsked",
            "memlog.AnswerGiven",
        ]
    finally:
        codec.close()


def test_schemas_register_puts_every_type_in_the_registry_with_its_compatibility(registry_url: str) -> None:
    from memlog.dev.processes import run_cli

    settings = Settings(schema_registry_url=registry_url)
    done = run_cli(settings, "schemas", "register", "--compatibility", "FULL")
    assert done.returncode == 0, done.stdout + done.stderr
    registry = HttpSchemaRegistry(registry_url)
    try:
        for name in Catalog().names():
            assert f"{name}: id " in done.stdout
            assert registry.compatibility(name) == "FULL", name
    finally:
        registry.close()
