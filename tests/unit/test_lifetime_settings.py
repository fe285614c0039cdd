"""Lifetimes set in seconds or in fractions of days (issue 36), the dead-letter topic's retention, and when
the worker's scheduled compaction is due (the ledger says what waits for it)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from memlog.adapters.in_memory.privacy import InMemoryLedger
from memlog.config.settings import Settings
from projections.archives import DAY_MS
from projections.facts import FactPolicy
from streams.compaction import COMPACTED, compact_if_due, compaction_due
from streams.topics import retention_needed, topic_configs

MASTER = bytes(32)


def test_days_settings_take_fractions_so_a_test_can_drive_time(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path,
        facts_keep_days=0.0001,
        trace_days=0.0001,
        retention_task_days=0.0001,
        retention_main_days=0.5,
        retention_subagent_days=0.0001,
    )
    assert settings.fact_policy() == FactPolicy(keep_ms=8640, max_facts=30, max_chars=500, tenant_max_facts=200)
    assert retention_needed(settings, settings.topic("traces")) == 8640
    assert settings.retention_policy().days == {"main": 0.5, "task": 0.0001, "subagent": 0.0001}
    assert settings.retention_policy().days["main"] * DAY_MS == 43_200_000
    with pytest.raises(ValidationError):
        Settings(home=tmp_path, facts_keep_days=0)


def test_the_deadletter_topic_keeps_a_record_for_its_setting_in_segments_that_roll(tmp_path: Path) -> None:
    short = Settings(home=tmp_path, deadletter_retention_seconds=30)
    configs = topic_configs(short, short.deadletter_topic)
    assert configs["retention.ms"] == "30000" and configs["segment.ms"] == "30000"
    default = Settings(home=tmp_path)
    configs = topic_configs(default, default.deadletter_topic)
    assert configs["retention.ms"] == str(7 * 86_400_000) and configs["segment.ms"] == str(86_400_000)


def test_a_ledger_kept_less_than_the_ingest_topic_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"MEMLOG_LEDGER_DAYS=0\.01 is shorter than MEMLOG_INGEST_RETENTION"):
        Settings(home=tmp_path, ledger_days=0.01)
    assert Settings(home=tmp_path, ledger_days=0.01, ingest_retention_seconds=60).ledger_days == 0.01


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now


async def test_compaction_is_due_after_an_erasure_or_purge_until_one_covers_it() -> None:
    clock = Clock()
    ledger = InMemoryLedger(MASTER, clock)
    done: list[int] = []

    async def compact() -> list[str]:
        done.append(1)
        return ["redis: snapshot started (BGSAVE)"]

    assert await compaction_due(ledger) is None
    await ledger.record("exported", tenant="t", subject="ann")  # deletes nothing
    assert await compact_if_due(ledger, compact, 0, clock=clock) is None and not done
    await ledger.record("erased", tenant="t", subject="ann")
    assert await compaction_due(ledger) == clock.now
    # the compaction of now covers what was recorded a settling time before it started
    assert await compact_if_due(ledger, compact, 30, clock=clock) == ["redis: snapshot started (BGSAVE)"]
    assert await compaction_due(ledger) is not None  # the erasure is not 30 s old: it may not be applied yet
    clock.now += dt.timedelta(seconds=31)
    await compact_if_due(ledger, compact, 30, clock=clock)
    assert len(done) == 2 and await compaction_due(ledger) is None
    assert await compact_if_due(ledger, compact, 30, clock=clock) is None and len(done) == 2
    clock.now += dt.timedelta(seconds=5)
    await ledger.record("retention", tenant="t", conversation="old")
    clock.now += dt.timedelta(seconds=60)
    await compact_if_due(ledger, compact, 30, clock=clock)
    assert len(done) == 3 and await compaction_due(ledger) is None
    entries = await ledger.entries(kind=COMPACTED)
    assert [entry["by"] for entry in entries] == ["schedule"] * 3


ROOT = Path(__file__).resolve().parents[2]


def lifetime_table(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index("| personal data | where |")
    return text[start : text.index("\n\n", start)]


def test_the_docs_page_holds_designs_lifetime_table_and_each_setting_it_names_exists() -> None:
    table = lifetime_table(ROOT / "DESIGN.md")
    assert lifetime_table(ROOT / "docs" / "operators" / "lifetimes.md") == table
    named = set(re.findall(r"`MEMLOG_([A-Z_]+)`", table))
    assert len(named) >= 15
    fields = Settings.model_fields
    assert {name for name in named if name.lower() not in fields} == set()
