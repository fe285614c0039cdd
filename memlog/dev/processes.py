"""Run memlog's own processes (worker, API) as subprocesses with given settings.

The suite and the benchmarks both start memlog this way; `isolated` gives a run topics, a consumer
group and store namespaces of its own on a shared local stack.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import IO, Any

import httpx
from pydantic import SecretStr

from memlog.config.settings import Settings
from schemas.errors import MemlogError

READY_TIMEOUT = 90.0


class ProcessFailed(MemlogError):
    """A memlog process exited, or never became ready, while it was waited for."""


def isolated(settings: Settings, **overrides: Any) -> Settings:
    """Settings with topics, consumer group and store namespaces of their own (one per test or run)."""
    tag = uuid.uuid4().hex[:10]
    values: dict[str, Any] = {
        "topic_prefix": f"test-{tag}",
        "app_id": f"memlog-test-{tag}",
        "namespace": f"t{tag}",
        "mongo_database": "memlogtest",
        "privacy_database": "memlogtest_privacy",
        "partitions": 6,
        "read_wait_seconds": 30.0,  # a shared CI machine may be slow; the wait is a bound, not a timing check
        # a run's worker does not rewrite the shared servers' files for other runs' erasures (a SecantusDB
        # checkpoint holds its lock meanwhile); a test of compaction sets its own bound
        "compact_after_seconds": 0.0,
    }
    values.update(overrides)
    return settings.model_copy(update=values)


def settings_env(settings: Settings) -> dict[str, str]:
    """The MEMLOG_* environment that rebuilds these settings in another process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOG_")}
    for name, value in settings.model_dump().items():
        if isinstance(value, SecretStr):
            env[f"MEMLOG_{name.upper()}"] = value.get_secret_value()
        elif isinstance(value, dict | list):
            env[f"MEMLOG_{name.upper()}"] = json.dumps(value)  # pydantic-settings reads complex values as JSON
        elif value is not None:
            env[f"MEMLOG_{name.upper()}"] = str(value)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MemlogProcess:
    def __init__(self, part: str, settings: Settings, log_dir: Path) -> None:
        self.part = part
        self.settings = settings
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{part}-{settings.app_id}-{time.monotonic_ns()}.log"
        self._log: IO[bytes] = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memlog", part],
            env=settings_env(settings),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, marker: str, timeout: float = READY_TIMEOUT, after: int = 0) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.output()[after:]:
            if self.process.poll() is not None:
                self._log.close()
                raise ProcessFailed(f"{self.part} exited with {self.process.returncode}:\n{self.output()[-3000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise ProcessFailed(f"{self.part} never logged {marker!r}:\n{self.output()[-3000:]}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, no final commit."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._log.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


WORKER_READY = "[^Worker]: Ready"


def start_worker(settings: Settings, log_dir: Path) -> MemlogProcess:
    worker = MemlogProcess("worker", settings, log_dir)
    worker.wait_for(WORKER_READY)
    return worker


def start_api(settings: Settings, log_dir: Path) -> MemlogProcess:
    api = MemlogProcess("api", settings, log_dir)
    url = f"http://{settings.api_host}:{settings.api_port}"
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return api
        except httpx.HTTPError:
            pass
        if api.process.poll() is not None or time.monotonic() > deadline:
            raise ProcessFailed(f"api did not start:\n{api.output()[-3000:]}")
        time.sleep(0.2)


def run_cli(settings: Settings, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`memlog ARGS` as a process with these settings: its exit code and output, whatever they are."""
    return subprocess.run(
        [sys.executable, "-m", "memlog", *args],
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
