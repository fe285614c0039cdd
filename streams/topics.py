"""Creates memlog's topics with the configured partitions, replication and size limits."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from adapters.connections import kafka_options
from config.settings import Settings
from schemas.errors import LogUnavailable

log = logging.getLogger(__name__)


def topic_configs(settings: Settings) -> dict[str, str]:
    return {"max.message.bytes": str(settings.max_message_bytes)}


async def ensure_topics(settings: Settings) -> list[str]:
    """Create every missing topic; returns the names created. Existing topics are left as they are."""
    wanted = [*settings.subject_topics, settings.deadletter_topic]
    admin = AIOKafkaAdminClient(**kafka_options(settings), request_timeout_ms=15000)
    created: list[str] = []
    try:
        await admin.start()
        existing = set(await admin.list_topics())
        missing = [name for name in wanted if name not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # another process created it meanwhile
                await admin.create_topics(
                    [
                        NewTopic(name, settings.partitions, settings.replication, topic_configs=topic_configs(settings))
                        for name in missing
                    ]
                )
            created = missing
            log.info("created topics %s with %d partitions", ", ".join(missing), settings.partitions)
            await _wait_for_leaders(admin, missing, settings.partitions)
    except KafkaError as exc:
        raise LogUnavailable(f"kafka at {settings.bootstrap}: {exc}") from exc
    finally:
        await admin.close()
    return created


async def _wait_for_leaders(admin: AIOKafkaAdminClient, topics: list[str], partitions: int) -> None:
    """Return once every new partition has a leader: a consumer that joins earlier is handed no partitions
    and would not look again until its metadata refresh, minutes later."""
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        described = await admin.describe_topics(topics)
        ready = [
            topic
            for topic in described
            if topic.get("error_code", 0) == 0
            and len(topic.get("partitions", [])) == partitions
            and all(p.get("leader", -1) >= 0 for p in topic["partitions"])
        ]
        if len(ready) == len(topics):
            return
        await asyncio.sleep(0.1)
    log.warning("topics %s still lack partition leaders after 30s", ", ".join(topics))
