"""A bounded fuzz run of the OpenAPI description (schemathesis) with credentials: no 5xx."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlog.config.settings import Settings
from tests.conftest import unique_settings
from tests.e2e.conftest import LOGS
from tests.fuzz import fuzz_settings, run_fuzz

SECONDS = 90  # with the worker and API starting, about two minutes of the suite


@pytest.mark.slow
def test_a_fuzz_run_of_the_openapi_description_finds_no_server_error(stack: Settings, tmp_path: Path) -> None:
    report = run_fuzz(fuzz_settings(stack, unique_settings), SECONDS, tmp_path, LOGS)
    print("\n".join(report.lines()))
    assert report.requests > 0 and report.operations, (tmp_path / "fuzz.log").read_text()[-3000:]
    assert report.server_errors == [], "\n".join(report.server_errors[:20])
