"""memlog as a user installs it: a wheel built from this checkout, installed with its dependencies in
a fresh virtual environment outside the checkout, runs `memlog dev up`, `memlog up` and `memlog demo`
on the local stack, from a folder outside the checkout and without PYTHONPATH.

Nothing it imports or reads may come from the checkout: the modules, the Avro schemas and the local
stack's Kafka files must all resolve inside the virtual environment. It uses the running local
services (the suite's stack, on the configured ports) from a fresh memlog home, so `memlog dev up`
finds them up and starts nothing, and it never stops them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from memlog.config.settings import Settings
from memlog.dev.localstack import port_open
from memlog.dev.processes import WORKER_READY, free_port, isolated, settings_env

# Building and installing takes about a minute; the module is left out of `make test-fast`.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 600  # building the wheel, a fresh venv, and its dependencies from pip's cache or PyPI
UP_TIMEOUT = 180.0

# Run inside the installed environment: where each top-level package, the Avro schemas and the
# local Kafka's logging configuration come from.
WHERE = """
import json, importlib
from memlog.config.settings import Settings
from memlog.dev.localstack import Kafka, stack_file
from schemas.catalog import AVRO_DIR, HISTORY_DIR
from importlib.metadata import distribution
packages = ["memlog", "streams", "projections", "schemas"]
top_level = sorted({f.parts[0] for f in distribution("memlog").files or [] if f.suffix == ".py"})
logging_flag = next(a for a in Kafka(Settings()).command() if a.startswith("-Dlog4j2.configurationFile="))
print(json.dumps({
    "packages": {name: importlib.import_module(name).__file__ for name in packages},
    "top_level": top_level,
    "schemas": [str(p) for p in sorted(AVRO_DIR.glob("*.avsc")) + sorted(HISTORY_DIR.glob("*.avsc"))],
    "kafka_logging": logging_flag.split("=", 1)[1],
    "kafka_files": [str(stack_file("kafka", n)) for n in ("pom.xml", "server.properties.template")],
    "registry_pom": str(stack_file("registry", "pom.xml")),
}))
"""


def clean_env(env: dict[str, str], venv: Path) -> dict[str, str]:
    """The environment without anything that points Python at the checkout or another environment."""
    env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(command: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{command} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def source_copy(into: Path) -> Path:
    """What the wheel is built from: pyproject.toml, the README and the packages it declares.

    A copy, because setuptools builds in the source folder: it would write build/ and *.egg-info into
    the checkout, and package any stale module left in build/lib from an earlier build.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [pattern.rstrip("*") for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]]
    into.mkdir()
    for name in ("pyproject.toml", project["project"]["readme"]):
        shutil.copy2(ROOT / name, into / name)
    for package in packages:
        shutil.copytree(ROOT / package, into / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return into


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment, outside the checkout, holding the wheel and its dependencies."""
    work = tmp_path_factory.mktemp("wheel")
    assert not work.resolve().is_relative_to(ROOT)
    env = clean_env(dict(os.environ), work / "venv")
    started = time.monotonic()
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(work / "dist"), str(source_copy(work / "src"))],
        env,
        work,
        INSTALL_TIMEOUT,
    )
    (wheel,) = (work / "dist").glob("memlog-*.whl")
    run([sys.executable, "-m", "venv", str(work / "venv")], env, work, INSTALL_TIMEOUT)
    run([str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], env, work, INSTALL_TIMEOUT)
    print(f"built and installed {wheel.name} with its dependencies in {time.monotonic() - started:.0f}s")
    return work / "venv"


def wait_for(log: Path, markers: list[str], process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all(marker in log.read_text(errors="replace") for marker in markers):
        assert process.poll() is None, f"memlog up exited with {process.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"memlog up never logged {markers}:\n{log.read_text()[-3000:]}"
        time.sleep(0.3)


def test_the_installed_package_reads_nothing_from_the_checkout(venv: Path, tmp_path: Path) -> None:
    env = clean_env(settings_env(Settings(home=tmp_path / "home")), venv)
    done = run([str(venv / "bin" / "python"), "-c", WHERE], env, tmp_path, 120)
    where = json.loads(done.stdout)
    paths = [
        *where["packages"].values(),
        *where["schemas"],
        where["kafka_logging"],
        *where["kafka_files"],
        where["registry_pom"],
    ]
    for path in map(Path, paths):
        assert path.resolve().is_relative_to(venv.resolve()), path
        assert path.is_file(), path
    assert Path(where["kafka_logging"]).name == "log4j2.properties"
    # the import names the wheel takes: memlog's own and the three the design card names, none another
    # distribution could also take (adapters and config live inside memlog)
    assert where["top_level"] == ["memlog", "projections", "schemas", "streams"]
    shipped = {Path(p).relative_to(ROOT / "schemas") for p in (ROOT / "schemas" / "avro").rglob("*.avsc")}
    installed = {Path(p).relative_to(Path(where["packages"]["schemas"]).parent) for p in where["schemas"]}
    assert installed == shipped


@pytest.mark.timeout(1200)
def test_the_installed_wheel_runs_dev_up_up_and_the_demo(venv: Path, stack: Settings, tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The suite's services on their configured ports, seen from a fresh home; topics, consumer group
    # and namespaces of this run's own, so the demo shares nothing with other tests.
    settings = isolated(stack.model_copy(update={"home": home}), api_port=free_port())
    env = clean_env(settings_env(settings), venv)
    memlog = str(venv / "bin" / "memlog")

    dev_up = subprocess.run([memlog, "dev", "up"], env=env, cwd=elsewhere, capture_output=True, text=True, check=False)
    try:
        assert dev_up.returncode == 0, dev_up.stdout + dev_up.stderr
        assert "started: nothing (all running)" in dev_up.stdout, dev_up.stdout + dev_up.stderr
        assert all(line.split()[1] == "up" for line in dev_up.stdout.splitlines()[1:]), dev_up.stdout

        log = tmp_path / "up.log"
        with log.open("wb") as out:
            up = subprocess.Popen(
                [memlog, "up"], env=env, cwd=elsewhere, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            wait_for(log, ["memlog is up: API on", WORKER_READY], up, UP_TIMEOUT)
            demo = subprocess.run(
                [memlog, "demo"], env=env, cwd=elsewhere, capture_output=True, text=True, timeout=800, check=False
            )
            assert demo.returncode == 0, demo.stdout + demo.stderr
            for step in ("1. ", "2. ", "3. ", "4. ", "5. ", "nothing came back", "The tour ran to the end."):
                assert step in demo.stdout, demo.stdout
            up.send_signal(signal.SIGINT)  # Ctrl-C: memlog up stops its worker and API, and no service
            assert up.wait(timeout=90) == 0, log.read_text()[-3000:]
        finally:
            if up.poll() is None:
                os.killpg(up.pid, signal.SIGKILL)
                up.wait()
        assert not port_open(settings.api_port)
        status = run([memlog, "dev", "status"], env, elsewhere, 60).stdout
        assert [line.split()[1] for line in status.splitlines()] == ["up"] * len(status.splitlines()), status
    finally:
        if "started: nothing" not in dev_up.stdout:
            # it started a service after all (none was up): stop what this fresh home started, only that
            subprocess.run([memlog, "dev", "down"], env=env, cwd=elsewhere, capture_output=True, check=False)
