"""The log forgets on schedule, on the real broker, Redis and MongoDB-protocol server (issue 36).

Key periods of a day and a lifetime of a day (retention, sessions and traces all set to one day): a
subject's exchange 40 days old and one of now. With no command typed, the worker shreds the old
period's key; a scan of the topic with the keys that remain opens none of the old records and every
new one; a replay skips the old records with a count and rebuilds the new ones.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from memlog.config.settings import Settings
from memlog.services import open_services
from projections.periods import period_of
from projections.sealing import open_sealed
from tests.e2e.conftest import api_client, memlog, own_settings, replayed

TENANT = "forgetful"
SUBJECT = "ann"
DAY = 86_400_000
DEADLINE_SECONDS = 120
OLD = ["OLD-QUESTION-MARK", "OLD-TOOL-MARK", "OLD-ANSWER-MARK"]
NEW = ["NEW-QUESTION-MARK", "NEW-TOOL-MARK", "NEW-ANSWER-MARK"]


def lost_and_found(marks: list[str], at: int, key: str) -> dict[str, Any]:
    question, tool, answer = marks
    return {
        "tenant": TENANT,
        "subject": SUBJECT,
        "question": f"where did I leave it? {question}",
        "tool_calls": [{"name": "look", "arguments": {"where": tool}, "result": {"found": tool}}],
        "answer": f"under the bridge {answer}",
        "occurred_at": at,
        "idempotency_key": key,
    }


async def scan(settings: Settings) -> tuple[str, list[str]]:
    """Every record of the threads topic about the subject, opened with the keys that remain: the opened
    texts (and the raw bytes of every record), and the periods of those that do not open."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
    await consumer.start()
    texts: list[str] = []
    closed: list[str] = []
    try:
        async with open_services(settings) as services:
            tps = [TopicPartition(settings.topic("threads"), p) for p in range(settings.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            left = {tp for tp in tps if ends[tp] > 0}
            while left:
                for tp, records in (await consumer.getmany(*left, timeout_ms=1000)).items():
                    for record in records:
                        texts.append(repr(record.value))  # the bytes on the log, as they are
                        decoded = services.codec.decode(record.value)
                        envelope = decoded.record["envelope"]
                        if record.offset + 1 >= ends[tp]:
                            left.discard(tp)
                        if envelope["subject"] != SUBJECT:
                            continue
                        box = envelope["sealed"]
                        keys = await services.vault.keys_by_id([box["key_id"]])
                        if box["key_id"] not in keys:
                            closed.append(str(period_of(box["key_id"])))
                            continue
                        opened = open_sealed(decoded.full_name, decoded.record, keys[box["key_id"]])
                        texts.append(json.dumps(opened, default=str))
    finally:
        await consumer.stop()
    return "\n".join(texts), closed


@pytest.fixture(scope="module")
def live(stack: Settings) -> Iterator[Settings]:
    settings = own_settings(
        stack,
        retention_enabled=True,
        retention_main_days=1,
        retention_task_days=1,
        retention_subagent_days=1,
        retention_generation_seconds=86_400,
        trace_days=1,
        log_key_period_seconds=86_400,
        log_key_check_seconds=1.0,
    )
    with memlog(settings):
        yield settings


@pytest.mark.timeout(600)
async def test_a_shredded_period_no_longer_opens_and_a_replay_skips_it_with_a_count(live: Settings) -> None:
    settings = live
    assert settings.log_key_keep_ms() == DAY
    now = int(time.time() * 1000)
    async with api_client(settings) as http:
        for marks, at, key in ((OLD, now - 40 * DAY, "old-1"), (NEW, now, "new-1")):
            response = await http.post("/v1/exchanges", json=lost_and_found(marks, at, key))
            assert response.status_code == 202, response.text
        position = response.json()["position"]
        context = await http.get(f"/v1/tenants/{TENANT}/subjects/{SUBJECT}/context", params={"after": position})
        assert context.status_code == 200 and NEW[0] in context.json()["rendered"], context.text

        # the worker shreds the old period's key by itself: no command is typed
        deadline = time.monotonic() + DEADLINE_SECONDS
        texts, closed = await scan(settings)
        while len(closed) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(1)
            texts, closed = await scan(settings)
        old_period = f"s86400-{(now - 40 * DAY) // DAY}"
        assert closed == [old_period] * 3, closed  # question, tool call and answer of 40 days ago
        assert [texts.count(mark) for mark in OLD] == [0, 0, 0]  # 0 plaintext of them, on the log or opened
        assert all(texts.count(mark) >= 1 for mark in NEW)  # the newer records of the same subject open

        # a replay skips them with a count, and rebuilds the newer ones
        status = await replayed(http, {"projection": "all", "switch": True})
        assert status["state"] == "done" and status["switched"], status
        assert status["expired_events"] == 3 and status["skipped_events"] == 0, status
        # reads follow the switch within a second: the rebuilt archive holds the readable period only
        route = f"/v1/tenants/{TENANT}/threads/session:{SUBJECT}/conversations/main/export"
        for _ in range(60):
            transcript = await http.get(route)
            assert transcript.status_code == 200, transcript.text
            if OLD[0] not in transcript.text:
                break
            await asyncio.sleep(0.5)
        assert NEW[0] in transcript.text and all(mark not in transcript.text for mark in OLD)
        rebuilt = await http.get(f"/v1/tenants/{TENANT}/subjects/{SUBJECT}/context")
        assert rebuilt.status_code == 200 and NEW[0] in rebuilt.json()["rendered"] and OLD[0] not in rebuilt.text
