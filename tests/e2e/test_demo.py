"""`memlog demo` runs its whole tour against a running worker and API."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import settings_env
from tests.e2e.conftest import memlog, own_settings


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_demo_runs_to_the_end(stack: Settings) -> None:
    settings = own_settings(stack)
    with memlog(settings):
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
