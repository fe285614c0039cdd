"""A producer with no master key and no MongoDB access sends raw Avro bytes to the ingest topic, as a Java
producer would (an exchange, and a receipt for its tool call); the worker seals them onto the log, the
session shows the exchange, verified by the receipt, and after the
subject's erasure no topic holds any of its plaintext (the ingest records are deleted once sealed)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlog.config.settings import Settings
from tests.e2e.conftest import api_client, memlog, own_settings
from tests.e2e.residue import Scan, scan_kafka

ROOT = Path(__file__).resolve().parents[2]
TENANT = "ingest"

# Run in a process whose environment holds no MEMLOG_* setting: no master key, no MongoDB address. It
# builds the records from memlog's Avro schemas and sends the bytes with a plain Kafka producer.
PRODUCER = """
import asyncio, sys
from aiokafka import AIOKafkaProducer
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import Envelope, ReceiptRecorded, record_key, to_record
from schemas.exchanges import ReportedExchange, Route, ToolUse, exchange_events

bootstrap, topic, tenant, subject, marker = sys.argv[1:6]
exchange = ReportedExchange(
    Route(tenant, subject, "session", None, None, None),
    f"where did I park? {marker} question",
    (ToolUse("find_car", {"lot": marker}, {"level": f"{marker} result"}, True, 3),),
    f"On level 3, {marker} answer",
)
codec = Codec(Catalog())
events = exchange_events(exchange, producer="java-like")
# and a receipt (seed 004) for its tool call, which the worker seals onto the traces topic
envelope = Envelope(tenant=tenant, subject=subject, agent="allay", thread="session", producer="java-like")
events = [*events, ReceiptRecorded(envelope, "rc-1", events[0].exchange_id, 0, "passed", f"{marker} receipt")]

async def main():
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for event in events:
            value = codec.encode(event.TYPE, to_record(event))
            await producer.send_and_wait(topic, value, key=record_key(tenant, subject))
    finally:
        await producer.stop()
    print(events[0].exchange_id)

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def live(stack: Settings) -> Iterator[Settings]:
    with memlog(own_settings(stack, operator_tokens=["tok-op"])) as settings:
        yield settings


def produce_raw(settings: Settings, subject: str, marker: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOG_")}
    args = [settings.bootstrap, settings.topic("ingest"), TENANT, subject, marker]
    done = subprocess.run(
        [sys.executable, "-c", PRODUCER, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def test_raw_avro_on_the_ingest_topic_is_sealed_shown_and_erased_from_every_topic(live: Settings) -> None:
    subject = f"s-{uuid.uuid4().hex[:8]}"
    marker = f"zebra{uuid.uuid4().hex[:10]}"
    exchange_id = produce_raw(live, subject, marker)
    async with api_client(live, headers={"Authorization": "Bearer tok-op"}) as http:
        context: dict[str, object] = {}
        for _ in range(300):
            context = (await http.get(f"/v1/tenants/{TENANT}/subjects/{subject}/context")).json()
            shown = context.get("exchanges")
            if isinstance(shown, list) and shown and shown[0]["complete"] and shown[0]["answer_state"] == "verified":
                break
            await asyncio.sleep(0.2)
        exchanges = context["exchanges"]
        assert isinstance(exchanges, list) and [e["exchange_id"] for e in exchanges] == [exchange_id], context
        assert exchanges[0]["complete"] and marker in exchanges[0]["answer"]
        assert exchanges[0]["answer_state"] == "verified", exchanges[0]  # the receipt came through ingest too

        for _ in range(50):  # the ingest records are deleted right after the batch that sealed them
            before = Scan()
            await scan_kafka(live, [marker], before)
            if all(where.endswith("(opened)") for where in before.found.get(marker, set())):
                break
            await asyncio.sleep(0.2)
        assert before.records >= 3  # the sealed events on the threads topic: the marker only when opened
        assert all(where.endswith("(opened)") for where in before.found.get(marker, set())), before.found
        assert before.found.get(marker), "the sealed events open with the subject's key"

        erased = await http.post(f"/v1/tenants/{TENANT}/subjects/{subject}/erase", json={"reason": "asked"})
        assert erased.status_code == 200 and erased.json()["done"], erased.text

    after = Scan()
    await scan_kafka(live, [marker], after)
    assert after.found == {}, after.found  # no topic holds the plaintext, sealed or not
