"""`memlog demo` runs its whole tour against a running worker and API."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from config.settings import Settings
from memlog.processes import free_port, settings_env, start_api, start_worker
from streams.topics import ensure_topics
from tests.conftest import unique_settings

LOGS = Path(__file__).resolve().parents[2] / ".memlog-test" / "logs"


@pytest.mark.timeout(900)
def test_the_demo_runs_to_the_end(stack: Settings) -> None:
    settings = unique_settings(stack, api_port=free_port())
    asyncio.run(ensure_topics(settings))
    worker = start_worker(settings, LOGS)
    api = start_api(settings, LOGS)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memlog", "demo"],
            env=settings_env(settings),
            capture_output=True,
            text=True,
            timeout=800,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        for step in ("1. ", "2. ", "3. ", "4. ", "5. ", "nothing came back", "The tour ran to the end."):
            assert step in done.stdout, done.stdout
    finally:
        api.stop()
        worker.stop()
