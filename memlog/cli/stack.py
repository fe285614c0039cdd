"""`memlog dev up | down | status`, `memlog api` and `memlog up`: the local stack and memlog's own processes."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx

from memlog.config.settings import Settings
from memlog.dev.localstack import LocalStack
from memlog.dev.localstack.cluster import LocalRedisCluster
from memlog.dev.localstack.kafka_cluster import LocalKafkaCluster
from memlog.dev.supervisor import Supervised
from schemas.errors import MemlogError


def dev(settings: Settings, action: str, what: str = "stack") -> int:
    stack: LocalStack | LocalRedisCluster | LocalKafkaCluster
    if what == "redis-cluster":
        stack = LocalRedisCluster(settings)
    elif what == "kafka-cluster":
        stack = LocalKafkaCluster(settings)
    else:
        stack = LocalStack(settings)
    if action == "up":
        started = stack.up()
        print(f"started: {', '.join(started) or 'nothing (all running)'}")
    elif action == "down":
        stopped = stack.down()
        print(f"stopped: {', '.join(stopped) or 'nothing memlog had started'}")
    for status in stack.status():
        state = "up" if status.up else "down"
        owner = f"pid {status.pid}" if status.managed else status.detail
        print(f"{status.name:6} {state:5} {status.endpoint:28} {owner}")
    if isinstance(stack, LocalRedisCluster) and action != "down":
        print(f"MEMLOG_REDIS_URL={stack.url} MEMLOG_REDIS_CLUSTER=true")
    if isinstance(stack, LocalKafkaCluster) and action != "down":
        print(f"MEMLOG_KAFKA_BOOTSTRAP={stack.bootstrap} MEMLOG_REPLICATION=3 MEMLOG_MIN_INSYNC_REPLICAS=2")
    return 0


def api(settings: Settings) -> int:
    import uvicorn

    from memlog.api import create_api
    from memlog.api.connections import ConnectionLimits, guarded_protocol
    from streams.tracing import setup_tracing

    setup_tracing(settings, "api")
    uvicorn.run(
        create_api(settings),
        host=settings.api_host,
        port=settings.api_port,
        log_level="info",
        access_log=False,
        timeout_keep_alive=settings.api_keep_alive_seconds,  # uvicorn's 5 s met httpx's 5 s pool: ReadError
        # httptools (C parsers and event loop: about a third off each request, bench/context_read.py), with
        # the bounds on slow clients uvicorn lacks (memlog/api/connections.py)
        http=guarded_protocol(
            ConnectionLimits(
                header_seconds=settings.api_header_timeout_seconds,
                body_seconds=settings.api_body_timeout_seconds,
                header_bytes=settings.api_max_header_bytes,
                per_address=settings.api_connections_per_address,
            )
        ),
        loop="uvloop",
    )
    return 0


def worker_env(settings: Settings, which: tuple[str, ...] | None = None, index: int = 0) -> dict[str, str]:
    """A supervised worker's environment: restarted under one name (unless MEMLOG_WORKER_INSTANCE gives
    one), the host's and this process's, so a worker started again takes its partitions back at once.

    `which` is its set (MEMLOG_WORKER_PROJECTIONS); the set is a consumer group of its own, and its
    metrics port, when one is set, is MEMLOG_WORKER_METRICS_PORT plus the set's index.
    """
    env = os.environ.copy()
    if settings.worker_instance is None:
        host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:120] or "host"
        env["MEMLOG_WORKER_INSTANCE"] = f"{host}-{os.getpid()}"
    if which is not None:
        env["MEMLOG_WORKER_PROJECTIONS"] = ",".join(which)
        if settings.worker_metrics_port is not None:
            env["MEMLOG_WORKER_METRICS_PORT"] = str(settings.worker_metrics_port + index)
    return env


def supervised_workers(settings: Settings) -> list[Supervised]:
    """One supervised worker per set of MEMLOG_UP_WORKER_SETS; one called "worker" when the set is all."""
    sets = settings.up_sets()  # checked when the settings loaded
    command = [sys.executable, "-m", "memlog", "worker"]
    if len(sets) == 1:
        return [Supervised("worker", command, worker_env(settings, sets[0]))]
    return [
        Supervised(f"worker {','.join(which)}", command, worker_env(settings, which, index))
        for index, which in enumerate(sets)
    ]


def up(settings: Settings) -> int:
    """The main job: local stack, workers and API; Ctrl-C stops everything this started.

    The workers run in the sets of MEMLOG_UP_WORKER_SETS, one process each, each in a consumer group of
    its own with its own watchdog. A worker that exits with a failure (its watchdog's code 75, a signal)
    is started again after a delay that doubles up to 30 s (memlog/dev/supervisor.py), and no other set is
    touched; a worker that stops on purpose (exit 0), or the API exiting, stops everything.
    """
    workers = supervised_workers(settings)
    stack = LocalStack(settings)
    started = stack.up()
    api: subprocess.Popen[bytes] | None = None
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        from streams.topics import ensure_topics

        asyncio.run(ensure_topics(settings))
        first = [worker.start() for worker in workers]
        api = subprocess.Popen([sys.executable, "-m", "memlog", "api"], env=os.environ.copy())
        url = f"http://{settings.api_host}:{settings.api_port}"
        wait_healthy(url, [*first, api])
        print(f"memlog is up: API on {url} (OpenAPI at {url}/docs). Ctrl-C stops it.", flush=True)
        while not stopping:
            for worker in workers:
                if not worker.keep():
                    print(f"memlog: the {worker.name} stopped", file=sys.stderr)
                    stopping = True
            if api.poll() is not None:
                print(f"memlog: the api process exited with {api.returncode}", file=sys.stderr)
                stopping = True
            time.sleep(0.5)
    finally:
        for worker in workers:
            worker.terminate()
        if api is not None and api.poll() is None:
            api.terminate()
        # a worker exits within MEMLOG_WORKER_STOP_SECONDS whatever Kafka does; the API stops quickly
        for worker in workers:
            worker.wait(timeout=settings.worker_stop_seconds + 15)
        if api is not None:
            try:
                api.wait(timeout=30)
            except subprocess.TimeoutExpired:
                api.kill()
        stack.down(started)
    return 0


def wait_healthy(url: str, children: list[subprocess.Popen[bytes]], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(child.poll() is not None for child in children):
            raise MemlogError("a memlog process exited during start-up; see the log above")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise MemlogError(f"the API did not answer on {url} within {timeout:.0f}s")
