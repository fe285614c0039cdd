"""A local Kafka cluster of three KRaft nodes on loopback ports (each a broker and a controller, from
the same Maven Central jars as the single local broker), for trying and testing memlog on replicated
topics: replication factor 3, min.insync.replicas 2, one broker may be lost.

`memlog dev up|down|status kafka-cluster`; the test suite starts it the same way. Node n (1 to 3) serves
clients on `local_kafka_cluster_port + n - 1` and its controller on that port + 100; its data lives under
<home>/kafka-cluster/<n>. The three storages are formatted once with one cluster id, for a static quorum
(`controller.quorum.voters`). Each node is a Service of its own, so a test can kill one and start it again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memlog.config.settings import Settings
from memlog.dev.localstack import (
    START_TIMEOUT_SECONDS,
    STOP_TIMEOUT_SECONDS,
    Kafka,
    Status,
    _alive,
    _kafka_answers,
    _kafka_uuid,
    port_open,
    stack_file,
)
from schemas.errors import ServiceSetupError

NODES = 3
CONTROLLER_OFFSET = 100  # a node's controller listens this far above its broker port
HEAP = "384m"


class KafkaClusterNode(Kafka):
    """Node `node_id` (1 to 3) of the local cluster: a combined broker and controller."""

    def __init__(self, settings: Settings, node_id: int) -> None:
        self.node_id = node_id
        self.name = f"kafka-cluster-{node_id}"
        super().__init__(settings)

    @property
    def port(self) -> int:
        return self.settings.local_kafka_cluster_port + self.node_id - 1

    @property
    def controller_port(self) -> int:
        return self.port + CONTROLLER_OFFSET

    @property
    def external(self) -> bool:
        return False

    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def heap(self) -> str:
        return HEAP

    @property
    def folder(self) -> Path:
        return self.home / "kafka-cluster"

    @property
    def data(self) -> Path:
        return self.folder / str(self.node_id)

    @property
    def config(self) -> Path:
        return self.folder / f"server-{self.node_id}.properties"

    def voters(self) -> str:
        base = self.settings.local_kafka_cluster_port + CONTROLLER_OFFSET
        return ",".join(f"{n}@127.0.0.1:{base + n - 1}" for n in range(1, NODES + 1))

    def cluster_id(self) -> str:
        """The cluster's id, made by the first node formatted and kept for the others."""
        path = self.folder / "cluster.id"
        if not path.is_file():
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_text(_kafka_uuid() + "\n")
        return path.read_text().strip()

    def prepare(self) -> None:
        self.resolve_libs()
        self.data.mkdir(parents=True, exist_ok=True)
        template = stack_file("kafka", "cluster.properties.template").read_text()
        self.config.write_text(
            template.format(
                node_id=self.node_id,
                voters=self.voters(),
                port=self.port,
                controller_port=self.controller_port,
                data_dir=self.data,
                partitions=self.settings.partitions,
                max_message_bytes=max(2 * self.settings.max_message_bytes, 2_097_152),
            )
        )
        if not (self.data / "meta.properties").is_file():
            # a static quorum: no --standalone, every node formatted with the same cluster id
            subprocess.run(
                self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id(), "-c", str(self.config)),
                check=True,
                stdout=subprocess.DEVNULL,
            )

    def ready(self) -> bool:
        return port_open(self.port) and _kafka_answers(self.endpoint())

    def kill(self) -> int:
        """SIGKILL the node (a crash: no controlled shutdown) and reap it; returns the pid killed."""
        pid = self.managed_pid()
        if pid is None:
            raise ServiceSetupError(f"{self.name} is not running under memlog (no live pid in {self.pid_file})")
        os.killpg(pid, signal.SIGKILL)
        if self._process is not None and self._process.pid == pid:
            self._process.wait()
            self._process = None
        else:  # started by another process: wait until it is gone
            deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        return pid


class LocalKafkaCluster:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.nodes = [KafkaClusterNode(settings, n) for n in range(1, NODES + 1)]

    @property
    def bootstrap(self) -> str:
        """All three brokers, so a client starts whichever of them is down."""
        return ",".join(node.endpoint() for node in self.nodes)

    def node(self, node_id: int) -> KafkaClusterNode:
        return self.nodes[node_id - 1]

    def up(self) -> list[str]:
        """Start the nodes that are missing (all launched before any is waited for: a node answers only
        once a quorum of controllers runs) and wait until every broker is registered."""
        started: list[str] = []
        try:
            for node in self.nodes:
                if node.launch():
                    started.append(node.name)
            for node in self.nodes:
                node.wait_ready()
            self.wait_brokers(NODES)
        except BaseException:
            self.down(started)
            raise
        return started

    def wait_brokers(self, count: int) -> None:
        """Wait until `count` brokers are registered with the cluster."""
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while (found := self.brokers()) < count:
            if time.monotonic() > deadline:
                raise ServiceSetupError(f"the local Kafka cluster has {found} brokers, not {count}")
            time.sleep(0.5)

    def brokers(self) -> int:
        """How many brokers the cluster's metadata lists (0 when it does not answer)."""
        from aiokafka.admin import AIOKafkaAdminClient
        from aiokafka.errors import KafkaError

        async def count() -> int:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=3000)
            try:
                await admin.start()
                described = await admin.describe_cluster()
                return len(described.get("brokers", []))
            except (KafkaError, OSError):
                return 0
            finally:
                await admin.close()

        return asyncio.run(count())

    def down(self, only: list[str] | None = None) -> list[str]:
        """Stop the nodes together: one by one, the last would wait for a quorum that is gone."""
        chosen = [node for node in self.nodes if only is None or node.name in only]
        with ThreadPoolExecutor(max_workers=NODES) as pool:
            stopped = list(pool.map(lambda node: node.stop(), chosen))
        return [node.name for node, done in zip(chosen, stopped, strict=True) if done]

    def status(self) -> list[Status]:
        found = [node.status() for node in self.nodes]
        brokers = self.brokers() if any(status.up for status in found) else 0
        for status in found:
            status.detail = f"{brokers} brokers registered" + (f"; {status.detail}" if status.detail else "")
        return found
