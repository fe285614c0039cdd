"""Creates memlog's topics with the configured partitions, replication, size limits and the retention replay needs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from memlog.adapters.connections import kafka_options
from memlog.config.settings import Settings
from schemas.errors import LogUnavailable, ServiceSetupError

log = logging.getLogger(__name__)


FOREVER = -1


def ingest_configs(settings: Settings) -> dict[str, str]:
    """The ingest topic (streams/ingest.py): short retention in small segments. Kafka deletes whole
    segments only, so a segment rolls as often as the retention runs out: an unsealed record is gone at
    most about twice MEMLOG_INGEST_RETENTION_SECONDS after it was sent, even with no worker running."""
    ms = str(settings.ingest_retention_seconds * 1000)
    return {
        "retention.ms": ms,
        "segment.ms": ms,
        "max.message.bytes": str(settings.max_message_bytes),
        # the broker dates each record: a producer's clock cannot date a record before an erasure it followed
        "message.timestamp.type": "LogAppendTime",
    }


def retention_needed(settings: Settings, topic: str) -> int:
    """The shortest retention (ms, -1 for none) a topic may have so that a replay rebuilds every projection.

    Threads feed the archives, which keep conversations with no age limit; a fact lives 365 days after
    the subject's *last* question, however old its event; erasures and exports must stay replayable.
    A trace lives `trace_days` after its run, so its topic need keep no more (and keeps no more: a trace
    holds the subject's questions, seed 000).
    """
    if topic == settings.topic("traces"):
        return round(settings.trace_days * 86_400_000)
    return FOREVER


def topic_configs(settings: Settings, topic: str) -> dict[str, str]:
    if topic == settings.topic("ingest"):
        return ingest_configs(settings)
    configs = {"max.message.bytes": str(settings.max_message_bytes)}
    if settings.min_insync_replicas is not None:  # with acks=all, how many replicas hold a record before it counts
        configs["min.insync.replicas"] = str(settings.min_insync_replicas)
    if topic == settings.deadletter_topic:
        configs.update(deadletter_configs(settings))
    else:
        configs["retention.ms"] = str(retention_needed(settings, topic))
        configs["retention.bytes"] = str(FOREVER)
    return configs


def deadletter_configs(settings: Settings) -> dict[str, str]:
    """A dead letter may hold what a producer sent (personal data): kept MEMLOG_DEADLETTER_RETENTION_SECONDS,
    in segments that roll at least daily (Kafka deletes whole segments), so it is gone at most a day later."""
    ms = settings.deadletter_retention_seconds * 1000
    return {"retention.ms": str(ms), "segment.ms": str(min(ms, 86_400_000)), "retention.bytes": str(FOREVER)}


async def apply_deadletter_retention(settings: Settings) -> None:
    """Set the dead-letter topic's retention to the setting, on a topic made earlier too. AlterConfigs
    replaces the topic's whole set: it gets every setting memlog gives it when it creates it. A refusal
    (a broker's ACLs) is logged, not fatal."""
    admin = AIOKafkaAdminClient(**kafka_options(settings), request_timeout_ms=15000)
    try:
        await admin.start()
        topic = settings.deadletter_topic
        responses = await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, topic_configs(settings, topic))]
        )
    except KafkaError as exc:
        raise LogUnavailable(f"kafka at {settings.bootstrap}: {exc}") from exc
    finally:
        await admin.close()
    for response in responses:
        for code, message, *_ in response.resources:
            if code:  # a broker whose ACLs refuse it: the worker runs, and says so
                log.warning("the broker refused %s's retention (error %s: %s); set it by hand", topic, code, message)


async def ensure_topics(settings: Settings) -> list[str]:
    """Create every missing topic; returns the names created. Existing topics are left as they are."""
    wanted = [*settings.subject_topics, settings.deadletter_topic, settings.topic("ingest")]
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
                        NewTopic(
                            name, settings.partitions, settings.replication, topic_configs=topic_configs(settings, name)
                        )
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


async def check_retention(settings: Settings) -> None:
    """Refuse to run against topics that drop records a projection still needs (made elsewhere, or
    by an older memlog with the broker's default of 7 days)."""
    admin = AIOKafkaAdminClient(**kafka_options(settings), request_timeout_ms=15000)
    try:
        await admin.start()
        wanted = {"retention.ms": None, "retention.bytes": None}
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, dict(wanted)) for name in settings.subject_topics]
        )
    except KafkaError as exc:
        raise LogUnavailable(f"kafka at {settings.bootstrap}: {exc}") from exc
    finally:
        await admin.close()
    problems = []
    for response in responses:
        for resource in response.to_object()["resources"]:
            name = resource["resource_name"]
            values = {e["config_names"]: int(e["config_value"]) for e in resource["config_entries"]}
            needed = retention_needed(settings, name)
            kept = values.get("retention.ms", FOREVER)
            if kept != FOREVER and (needed == FOREVER or kept < needed):
                problems.append(f"{name} keeps records {kept} ms, memlog needs retention.ms={needed}")
            if values.get("retention.bytes", FOREVER) != FOREVER:
                problems.append(f"{name} drops records past {values['retention.bytes']} bytes, memlog needs none")
    if problems:
        raise ServiceSetupError(
            "topics would lose records a replay needs: "
            + "; ".join(problems)
            + " (fix with kafka-configs.sh --alter --entity-type topics --entity-name <topic> --add-config ...)"
        )


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
