"""MEMLOG_WORKER_INSTANCE: the static member name a worker joins its group under, and `memlog up`'s."""

from __future__ import annotations

import os
import re

import pytest
from pydantic import ValidationError

from memlog.cli.stack import worker_env
from memlog.config.settings import Settings
from streams.app import create_app

KAFKA_INSTANCE_ID = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def settings(**values: object) -> Settings:
    return Settings(app_id="memlog", namespace="live", **values)  # type: ignore[arg-type]


def test_unset_the_worker_is_a_dynamic_member() -> None:
    assert settings().worker_instance is None
    assert create_app(settings()).conf.consumer_group_instance_id is None


def test_a_name_reaches_the_consumer_as_its_group_instance_id() -> None:
    app = create_app(settings(worker_instance="host-1.worker_0"))
    assert app.conf.consumer_group_instance_id == "host-1.worker_0"


@pytest.mark.parametrize("name", ["", "a b", "worker/0", "wörker", "x" * 201, "a\nb"])
def test_a_name_kafka_would_refuse_is_refused_at_start_naming_the_setting(name: str) -> None:
    with pytest.raises(ValidationError, match="worker_instance"):
        settings(worker_instance=name)


def test_a_session_longer_than_faust_allows_is_refused_at_start() -> None:
    with pytest.raises(ValidationError, match="worker_session_timeout_seconds"):
        settings(worker_session_timeout_seconds=91)
    assert settings(worker_session_timeout_seconds=90).worker_session_timeout_seconds == 90


def test_memlog_up_names_its_worker_after_the_host_and_its_own_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMLOG_WORKER_INSTANCE", raising=False)
    monkeypatch.setattr("socket.gethostname", lambda: "pod 7/ünïcode")
    name = worker_env(settings())["MEMLOG_WORKER_INSTANCE"]
    assert name == f"pod-7--n-code-{os.getpid()}"
    assert KAFKA_INSTANCE_ID.match(name)
    assert settings(worker_instance=name).worker_instance == name  # the worker accepts what up gives it
    assert worker_env(settings())["MEMLOG_WORKER_INSTANCE"] == name  # the same name at every restart


def test_memlog_up_names_even_a_nameless_or_enormous_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMLOG_WORKER_INSTANCE", raising=False)
    for host in ["", "h" * 5000]:
        monkeypatch.setattr("socket.gethostname", lambda host=host: host)
        name = worker_env(settings())["MEMLOG_WORKER_INSTANCE"]
        assert settings(worker_instance=name).worker_instance == name


def test_memlog_up_keeps_a_name_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLOG_WORKER_INSTANCE", "given-0")
    assert worker_env(settings(worker_instance="given-0"))["MEMLOG_WORKER_INSTANCE"] == "given-0"


def test_an_empty_name_in_the_environment_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLOG_WORKER_INSTANCE", "")  # as docker-compose.yml and the manifests leave it
    assert settings().worker_instance is None
