"""The Faust App, and nothing else: agents live per area under streams/agents/."""

from __future__ import annotations

import faust

from memlog.adapters.connections import faust_credentials
from memlog.config.settings import Settings


def create_app(settings: Settings) -> faust.App:
    datadir = settings.home / "faust" / settings.group_id  # Faust writes here even with memory://
    datadir.mkdir(parents=True, exist_ok=True)
    return faust.App(
        settings.group_id,
        broker=f"kafka://{settings.bootstrap}",
        broker_credentials=faust_credentials(settings),
        store="memory://",
        datadir=str(datadir),
        web_enabled=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        topic_allow_declare=False,  # streams/topics.py creates topics with their size limits
        # no agent or timer runs on the leader only: without this Faust subscribes to a leader topic
        # nobody creates, logs it missing, and rebalances the group once a broker that auto-creates
        # topics has made it (30 s after a new group's start, at the next metadata refresh)
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        broker_commit_every=100,
        broker_commit_interval=1.0,
        # heartbeats come from the consumer's own thread, so a slow batch never expires the session;
        # a SIGKILLed worker's partitions move on after this instead of Faust's 60 s
        broker_session_timeout=settings.worker_session_timeout_seconds,
        # a static member restarted under its name is given its partitions back without a rebalance
        consumer_group_instance_id=settings.worker_instance,
        producer_acks=-1,
        producer_max_request_size=settings.max_message_bytes,
        stream_wait_empty=False,
        # after a store outage a worker was once seen to fetch nothing until its next metadata refresh
        # (aiokafka's default: 5 min); refreshing every 30 s bounds such a stall
        consumer_metadata_max_age_ms=30_000,
    )
