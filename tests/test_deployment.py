"""docker-compose.yml mirrors every setting, and the settings load from it as they are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memlog.settings import Settings

COMPOSE = (Path(__file__).resolve().parent.parent / "docker-compose.yml").read_text()


def compose_env() -> dict[str, str]:
    block = COMPOSE.split("x-memlog-env: &memlog-env", 1)[1].split("\n\n", 1)[0]
    found = re.findall(r"^\s+(MEMLOG_[A-Z_]+):\s*(.*?)(?:\s+#.*)?$", block, re.M)
    return {key: value.strip().strip('"') for key, value in found}


def test_every_setting_is_mirrored_in_docker_compose() -> None:
    names = {f"MEMLOG_{name.upper()}" for name in Settings.model_fields}
    assert set(compose_env()) == names


def test_the_compose_environment_is_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in compose_env().items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert settings.kafka_bootstrap == "kafka:9092" and settings.fold_tokens == 32_000
    assert settings.summarizer_url is None and settings.embeddings == "none"
    assert settings.credentials_file is None and settings.backend_tokens == {}
