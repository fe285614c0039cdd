"""MEMLOG_WORKER_PROJECTIONS: which projections a worker runs, and the consumer group of each set."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memlog.config.settings import WORKER_PROJECTIONS, Settings
from streams.projectors import PROJECTIONS


def settings(**values: object) -> Settings:
    return Settings(app_id="memlog", namespace="live", **values)  # type: ignore[arg-type]


def test_every_projection_replay_rebuilds_can_be_run_by_a_worker() -> None:
    assert set(PROJECTIONS) | {"privacy"} == set(WORKER_PROJECTIONS)


def test_all_runs_every_projection_in_the_group_workers_have_always_had() -> None:
    assert settings().worker_set() == WORKER_PROJECTIONS
    assert settings().group_id == "memlog-live"
    named = settings(worker_projections=",".join(WORKER_PROJECTIONS))
    assert named.worker_set() == WORKER_PROJECTIONS
    assert named.group_id == "memlog-live"  # every projection named is `all`: the same group


def test_a_set_is_read_in_a_fixed_order_and_has_a_group_of_its_own() -> None:
    one = settings(worker_projections=" traces , archives,privacy,facts")
    other = settings(worker_projections="facts,privacy,archives,traces")
    assert one.worker_set() == ("archives", "facts", "traces", "privacy")
    assert one.group_id == other.group_id == "memlog-live.archives.facts.traces.privacy"
    sessions = settings(worker_projections="sessions")
    assert sessions.group_id == "memlog-live.sessions"
    assert len({settings().group_id, one.group_id, sessions.group_id}) == 3


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("", "''"),
        ("sessions,", "''"),
        ("session", "'session'"),
        ("all,sessions", "'all'"),
        ("Sessions", "'Sessions'"),
        ("sessions;archives", "'sessions;archives'"),
    ],
)
def test_a_name_that_is_not_a_projection_is_refused_by_name(value: str, named: str) -> None:
    with pytest.raises(ValidationError) as refused:
        settings(worker_projections=value)
    assert f"{named} is not a projection" in str(refused.value)
    assert "MEMLOG_WORKER_PROJECTIONS" in str(refused.value)


def test_a_projection_named_twice_is_refused() -> None:
    with pytest.raises(ValidationError, match="names a projection twice"):
        settings(worker_projections="sessions,sessions")


def test_memlog_up_runs_the_next_turns_reads_the_archive_and_the_rest_in_three_sets_by_default() -> None:
    assert settings().up_sets() == (("sessions", "facts"), ("archives",), ("traces", "privacy"))
    assert settings(up_worker_sets="all").up_sets() == (WORKER_PROJECTIONS,)
    assert settings(up_worker_sets=" archives ; sessions,facts,traces,privacy").up_sets() == (
        ("archives",),
        ("sessions", "facts", "traces", "privacy"),
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("sessions,facts;archives", "traces, privacy in none"),
        ("sessions,facts;archives,facts;traces,privacy", "facts in two sets"),
        ("all;sessions", "sessions in two sets"),
        ("sessions,facts;archives;traces,privacy;", "'' is not a projection"),
        ("sessions,facts;archive;traces,privacy", "'archive' is not a projection"),
    ],
)
def test_up_sets_that_leave_a_projection_out_or_run_one_twice_are_refused(value: str, problem: str) -> None:
    with pytest.raises(ValidationError) as refused:
        settings(up_worker_sets=value)
    assert problem in str(refused.value) and "MEMLOG_UP_WORKER_SETS" in str(refused.value)


def test_each_set_memlog_up_supervises_has_its_projections_and_a_metrics_port_of_its_own() -> None:
    from memlog.cli.stack import supervised_workers

    workers = supervised_workers(settings(worker_metrics_port=9464, worker_instance="host-1"))
    assert [worker.name for worker in workers] == ["worker sessions,facts", "worker archives", "worker traces,privacy"]
    envs = [worker.env for worker in workers]
    assert [env["MEMLOG_WORKER_PROJECTIONS"] for env in envs] == ["sessions,facts", "archives", "traces,privacy"]
    assert [env["MEMLOG_WORKER_METRICS_PORT"] for env in envs] == ["9464", "9465", "9466"]
    (one,) = supervised_workers(settings(up_worker_sets="all"))
    assert one.name == "worker" and one.env["MEMLOG_WORKER_PROJECTIONS"] == ",".join(WORKER_PROJECTIONS)
