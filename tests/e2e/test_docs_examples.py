"""Every shell and Python example of the README and the docs site runs against a running memlog.

An example that cannot run here starts with a line `# not run: <why>` (it starts a second stack, or
names hosts of your own); the suite counts those apart and runs every other one. Examples speak to
`localhost:8080`, where `make up` serves; the suite points them at an API of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import settings_env
from tests.e2e.conftest import memlog, own_settings

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"(?ms)^```(sh|bash|python)[^\n]*\n(.*?)^```")
NOT_RUN = re.compile(r"^# not run: \S")


def examples() -> list[tuple[str, str, str]]:
    """(where, language, code) of every shell and Python example, README first."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        text = page.read_text()
        for match in FENCE.finditer(text):
            line = text[: match.start()].count("\n") + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1), match.group(2)))
    return found


def _wait_ready(url: str, seconds: float = 180.0) -> None:
    """Examples are run as a newcomer runs them after `make up`: once every projection is ready."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(1)
    raise AssertionError(f"{url} not ready within {seconds} s")


def test_examples_are_found_and_each_one_left_out_says_why() -> None:
    found = examples()
    assert len(found) >= 5
    for where, _, code in found:
        first = code.splitlines()[0] if code.strip() else ""
        assert not first.startswith("# not run") or NOT_RUN.match(first), where


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_example_runs_against_a_running_memlog(stack: Settings, tmp_path: Path) -> None:
    settings = own_settings(stack)
    api_url = f"http://127.0.0.1:{settings.api_port}"
    env = {
        **settings_env(settings),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        # what the client's examples read; the suite's API is open on loopback, so any token passes
        "MEMLOG_URL": api_url,
        "MEMLOG_TOKEN": "docs-examples",
        "MEMLOG_OPERATOR_TOKEN": "docs-examples",
    }
    ran, left_out, failed = 0, [], []
    with memlog(settings):
        _wait_ready(f"{api_url}/readyz")
        for where, language, code in examples():
            if NOT_RUN.match(code.splitlines()[0] if code.strip() else ""):
                left_out.append(where)
                continue
            script = code.replace("localhost:8080", f"127.0.0.1:{settings.api_port}")
            command = (
                ["bash", "-euo", "pipefail", "-c", script] if language != "python" else [sys.executable, "-c", script]
            )
            done = subprocess.run(
                command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
            )
            ran += 1
            if done.returncode != 0:
                failed.append(f"{where}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    print(f"docs examples: {ran} ran, {len(left_out)} left out ({', '.join(left_out)})")
    assert not failed, "\n\n".join(failed)
    assert ran >= len(left_out)
