"""The local stack reads its Maven and Java files from the memlog package, never from a checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

import memlog.dev.localstack
from memlog.config.settings import Settings
from memlog.dev.localstack import Kafka, stack_file
from schemas.errors import ServiceSetupError

PACKAGE = Path(memlog.dev.localstack.__file__).resolve().parent
SHIPPED = [
    ("kafka", "cluster.properties.template"),
    ("kafka", "log4j2.properties"),
    ("kafka", "pom.xml"),
    ("kafka", "server.properties.template"),
    ("registry", "pom.xml"),
]


@pytest.mark.parametrize("parts", SHIPPED, ids="/".join)
def test_each_file_the_stack_reads_resolves_inside_the_package(parts: tuple[str, ...]) -> None:
    found = stack_file(*parts)
    assert found.resolve() == PACKAGE.joinpath(*parts)
    assert found.read_text(encoding="utf-8").strip()


def test_a_file_missing_from_the_package_is_a_setup_error_naming_it() -> None:
    with pytest.raises(ServiceSetupError, match=r"kafka/absent\.properties is missing from the memlog package"):
        stack_file("kafka", "absent.properties")


def test_the_local_kafka_logs_with_the_configuration_shipped_in_the_package(tmp_path: Path) -> None:
    command = Kafka(Settings(home=tmp_path)).command()
    assert f"-Dlog4j2.configurationFile={PACKAGE / 'kafka' / 'log4j2.properties'}" in command
    assert command[-2:] == ["kafka.Kafka", str(tmp_path / "kafka" / "server.properties")]


def test_the_package_data_globs_cover_every_file_beside_the_local_stack() -> None:
    """pyproject.toml ships kafka/* and registry/*: a file put anywhere else here would be left out of the wheel."""
    beside = {path.relative_to(PACKAGE).parts for path in PACKAGE.rglob("*") if path.is_file()}
    data = {
        parts for parts in beside if not parts[-1].endswith(".py") and "__pycache__" not in parts
    }  # modules ship as code
    assert data == set(SHIPPED)
