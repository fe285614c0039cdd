"""A bounded fuzz run of memlog's OpenAPI description with schemathesis, on the local stack.

`make fuzz` (FUZZ_SECONDS, default 120) and tests/e2e/test_openapi_fuzz.py both run it: a worker and
an API with credentials, on topics and namespaces of their own, then `schemathesis run` for the time
given, sending an operator's token (it passes every route's credential check, so what schemathesis
makes reaches each route's own validation). Left out: POST /v1/replays, each of which would start a
rebuild of every projection. It prints the figures (requests sent, operations covered, responses by
status class) and fails on any 5xx.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memlog.config.settings import Settings
from memlog.dev.processes import free_port, isolated, start_api, start_worker
from streams.topics import ensure_topics

ROOT = Path(__file__).resolve().parents[1]
OPERATOR_TOKEN = "fuzz-operator"
EXCLUDED_PATH = "/v1/replays"  # its only operation by this exact path is POST, which starts a replay
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
STATEFUL = "Stateful tests"  # the label of the phase that chains operations, not an operation


@dataclass
class FuzzReport:
    requests: int = 0
    operations: set[str] = field(default_factory=set)
    selected: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)  # one line per 5xx: operation, status, body
    # 503 with Retry-After is memlog's documented "not yet" (a read whose `after` is not applied within
    # its `wait`, a subject being erased): counted apart, not an error
    not_yet: int = 0

    def by_class(self) -> dict[str, int]:
        classes: Counter[str] = Counter(f"{status // 100}xx" for status in self.statuses.elements())
        return dict(sorted(classes.items()))

    def lines(self) -> list[str]:
        statuses = ", ".join(f"{status}: {count}" for status, count in sorted(self.statuses.items()))
        return [
            f"requests sent: {self.requests}",
            f"operations covered: {len(self.operations)} of {self.selected} selected",
            f"responses by class: {self.by_class()}",
            f"responses by status: {statuses}",
            f"5xx: {len(self.server_errors)} (and {self.not_yet} documented 503 with Retry-After)",
            *self.server_errors[:20],
        ]


def read_report(ndjson: Path) -> FuzzReport:
    """The figures of a run, from schemathesis's NDJSON event report."""
    report = FuzzReport()
    for line in ndjson.read_text().splitlines():
        event = json.loads(line)
        if "LoadingFinished" in event:
            report.selected = event["LoadingFinished"]["statistic"]["operations"]["selected"]
        scenario = event.get("ScenarioFinished")
        if scenario is None:
            continue
        recorder = scenario["recorder"]
        for interaction in (recorder.get("interactions") or {}).values():
            response = interaction.get("response")
            if response is None:  # the request itself failed (a timeout, a reset connection)
                report.server_errors.append(f"{recorder['label']}: no response")
                continue
            report.requests += 1
            if recorder["label"] != STATEFUL:
                report.operations.add(recorder["label"])
            report.statuses[response["status_code"]] += 1
            headers = {name.lower() for name in response.get("headers", {})}
            if response["status_code"] == 503 and "retry-after" in headers:
                report.not_yet += 1
            elif response["status_code"] >= 500:
                sent = interaction["request"].get("body") or {}
                body = base64.b64decode(sent.get("$base64", "")).decode("utf-8", "replace")[:300]
                report.server_errors.append(
                    f"{recorder['label']} -> {response['status_code']}: {interaction['request']['uri']} {body}"
                )
    return report


def fuzz_settings(stack: Settings, isolate: Callable[..., Settings] = isolated) -> Settings:
    """The fuzz run's settings, isolated by `isolate` (the suite's own, which deletes the topics at its end)."""
    return isolate(
        stack,
        api_port=free_port(),
        operator_tokens=[OPERATOR_TOKEN],
        backend_tokens={"fuzz-backend": "fuzz"},
        # a position taken from a 202 (stateful phase) is applied well within this; a valid token of a record
        # never written (the description says what a token looks like) waits it out, inside the request timeout
        read_wait_seconds=10.0,
        # readiness is tested on its own; under this load the worker lags a little behind, as it may
        ready_max_lag=1_000_000,
    )


def run_fuzz(settings: Settings, seconds: int, report_dir: Path, logs: Path, seed: int | None = None) -> FuzzReport:
    """Start a worker and an API with these settings, fuzz them for `seconds`, stop them."""
    asyncio.run(ensure_topics(settings))
    worker = start_worker(settings, logs)
    try:
        api = start_api(settings, logs)
        try:
            report_dir.mkdir(parents=True, exist_ok=True)
            ndjson = report_dir / "fuzz.ndjson"
            command = [
                str(SCHEMATHESIS),
                "run",
                f"http://127.0.0.1:{settings.api_port}/openapi.json",
                f"--max-time={seconds}",
                "--checks=not_a_server_error",
                f"--header=Authorization: Bearer {OPERATOR_TOKEN}",
                f"--exclude-path={EXCLUDED_PATH}",
                "--request-timeout=30",
                "--suppress-health-check=all",
                "--report=ndjson",
                f"--report-ndjson-path={ndjson}",
                "--no-color",
                *([f"--seed={seed}"] if seed is not None else []),
            ]
            finished = subprocess.run(command, cwd=report_dir, capture_output=True, text=True, check=False)
            (report_dir / "fuzz.log").write_text(finished.stdout + finished.stderr)
            return read_report(ndjson)
        finally:
            api.stop()
    finally:
        worker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=120, help="the time budget of the run")
    parser.add_argument("--seed", type=int, default=None, help="replay a run (the seed is in its log)")
    args = parser.parse_args(argv)
    home = Path(os.environ.get("MEMLOG_HOME", ROOT / ".memlog-test"))
    out = home / "fuzz"
    report = run_fuzz(fuzz_settings(Settings(home=home)), args.seconds, out, home / "logs", args.seed)
    print(f"schemathesis for {args.seconds} s against memlog (report: {out}):")
    for line in report.lines():
        print(f"  {line}")
    return 1 if report.server_errors or not report.requests else 0


if __name__ == "__main__":
    sys.exit(main())
