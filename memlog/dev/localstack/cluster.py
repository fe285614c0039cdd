"""A local Redis Cluster of three masters on loopback ports (Debian's redis-server in cluster mode),
for trying and testing memlog's cluster mode (`MEMLOG_REDIS_CLUSTER=true`) on one machine.

`memlog dev redis-cluster up|down|status`; the test suite starts it the same way. Each node keeps its
data and its cluster configuration under <home>/redis-cluster/<port>; the first start joins the three
into one cluster with every hash slot assigned.
"""

from __future__ import annotations

import shutil
import subprocess
import time

from memlog.config.settings import Settings
from memlog.dev.localstack import START_TIMEOUT_SECONDS, RedisServer, Status, install_redis, redis_server
from schemas.errors import ServiceSetupError

NODES = 3


class RedisClusterNode(RedisServer):
    def __init__(self, settings: Settings, index: int) -> None:
        self.index = index
        self.name = f"redis-cluster-{index}"
        super().__init__(settings)
        self.data = self.home / "redis-cluster" / str(self.port)

    @property
    def port(self) -> int:
        return self.settings.local_redis_cluster_port + self.index

    def prepare(self) -> None:
        if shutil.which("redis-server") is None:
            install_redis()
        self.data.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        cluster = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
        return redis_server(self.port, self.data, *cluster)


class LocalRedisCluster:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.nodes = [RedisClusterNode(settings, index) for index in range(NODES)]

    @property
    def url(self) -> str:
        """A URL of one node: the cluster client discovers the others from it."""
        return f"redis://127.0.0.1:{self.nodes[0].port}"

    def _cli(self, *args: str, port: int | None = None) -> str:
        command = [shutil.which("redis-cli") or "redis-cli", "-p", str(port or self.nodes[0].port), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise ServiceSetupError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def state(self) -> str:
        """`ok` once every slot is served; `fail` (or the error) otherwise."""
        try:
            info = self._cli("cluster", "info")
        except (ServiceSetupError, OSError, subprocess.TimeoutExpired) as exc:
            return f"unreachable: {exc}"
        fields = dict(line.split(":", 1) for line in info.split() if ":" in line)
        return fields.get("cluster_state", "unknown")

    def up(self) -> list[str]:
        """Start the nodes that are missing and form the cluster once; the names of those started."""
        started: list[str] = []
        try:
            for node in self.nodes:
                if node.start():
                    started.append(node.name)
            if self._slots_assigned() == 0:
                addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
                self._cli("--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes")
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while self.state() != "ok":
                if time.monotonic() > deadline:
                    raise ServiceSetupError(f"the local Redis Cluster is {self.state()!r}, not ok")
                time.sleep(0.2)
        except BaseException:
            self.down(started)
            raise
        return started

    def _slots_assigned(self) -> int:
        info = self._cli("cluster", "info")
        fields = dict(line.split(":", 1) for line in info.split() if ":" in line)
        return int(fields.get("cluster_slots_assigned", "0"))

    def down(self, only: list[str] | None = None) -> list[str]:
        return [node.name for node in reversed(self.nodes) if (only is None or node.name in only) and node.stop()]

    def status(self) -> list[Status]:
        found = [node.status() for node in self.nodes]
        state = self.state()
        for status in found:
            status.detail = f"cluster {state}" + (f"; {status.detail}" if status.detail else "")
        return found
