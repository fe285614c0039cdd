"""Replication settings of memlog's topics, and the local 3-node KRaft cluster's layout."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from memlog.config.settings import Settings
from memlog.dev.localstack import stack_file
from memlog.dev.localstack.kafka_cluster import LocalKafkaCluster
from streams.topics import topic_configs


def test_min_insync_replicas_is_set_on_the_topics_only_when_configured(tmp_path: Path) -> None:
    default = Settings(home=tmp_path)
    assert "min.insync.replicas" not in topic_configs(default, default.threads_topic)
    replicated = Settings(home=tmp_path, replication=3, min_insync_replicas=2)
    for topic in [*replicated.subject_topics, replicated.deadletter_topic]:
        assert topic_configs(replicated, topic)["min.insync.replicas"] == "2"


def test_min_insync_replicas_above_the_replication_factor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="MEMLOG_MIN_INSYNC_REPLICAS=2 exceeds MEMLOG_REPLICATION=1"):
        Settings(home=tmp_path, min_insync_replicas=2)


def test_the_local_cluster_has_three_nodes_in_one_static_quorum(tmp_path: Path) -> None:
    cluster = LocalKafkaCluster(Settings(home=tmp_path, local_kafka_cluster_port=29092))
    assert cluster.bootstrap == "127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094"
    assert [(node.port, node.controller_port) for node in cluster.nodes] == [
        (29092, 29192),
        (29093, 29193),
        (29094, 29194),
    ]
    voters = "1@127.0.0.1:29192,2@127.0.0.1:29193,3@127.0.0.1:29194"
    assert {node.voters() for node in cluster.nodes} == {voters}
    assert cluster.node(2).data == tmp_path / "kafka-cluster" / "2"
    assert cluster.node(1).cluster_id() == cluster.node(3).cluster_id()  # formatted with one id
    template = stack_file("kafka", "cluster.properties.template").read_text()
    for line in ("default.replication.factor=3", "min.insync.replicas=2", "offsets.topic.replication.factor=3"):
        assert line in template.splitlines()
    assert "-Xmx384m" in cluster.node(1).command()
