"""The log forgets on schedule (issue 36): a subject's events sealed per period, the period's key shredded
once nothing needs its records, the records left on the log unreadable."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlog.adapters.in_memory import InMemoryKeyVault, InMemoryLedger
from memlog.config.settings import Settings
from projections.periods import (
    PERIOD_SEALED,
    KeyPeriods,
    due,
    longest_need_ms,
    period_key_id,
    period_of,
    period_range,
    period_ref,
)
from projections.position import Position
from projections.receipts import receipt_document
from projections.sealing import needs_seal, seal, subject_ref
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.errors import PeriodShredded, Shredded
from schemas.events import Envelope, QuestionAsked, ReceiptRecorded, ThreadEvent, from_record, to_record
from streams.period_keys import shred_due_periods
from streams.sealer import Sealer
from tests.unit.strategies import thread_events

CODEC = Codec(Catalog())
DAY = 86_400_000
NOW = 1_796_083_200_000  # 2026-12-01 UTC
periods_of = st.sampled_from([KeyPeriods(), KeyPeriods(60), KeyPeriods(86_400), KeyPeriods(7 * 86_400)])


@given(at=st.integers(0, 4_102_444_800_000), periods=periods_of)
def test_a_period_holds_its_instants_and_its_label_names_it_alone(at: int, periods: KeyPeriods) -> None:
    label = periods.label(at)
    start, end = period_range(label)
    assert start <= at < end
    assert periods.label(start) == periods.label(end - 1) == label != periods.label(end)
    assert period_of(period_key_id(label)) == label


def test_calendar_months_run_across_a_year_end() -> None:
    assert KeyPeriods().label(NOW + 30 * DAY) == "m2026-12"
    start, end = period_range("m2026-12")
    assert (start, end) == (NOW, NOW + 31 * DAY)
    assert period_range("m2027-01")[0] == end


@pytest.mark.parametrize("not_a_label", ["", "m2026-13", "m2026-00", "s0-1", "s60", "x2026-01", "m2026-1"])
def test_what_is_not_a_label_is_refused(not_a_label: str) -> None:
    with pytest.raises(ValueError):
        period_range(not_a_label)
    assert period_of(f"abc.{not_a_label}") is None


def test_a_standing_key_id_names_no_period() -> None:
    assert period_of(os.urandom(16).hex()) is None


@given(st.text(), st.text(), st.sampled_from(["m2026-01", "s60-5", "s60-55"]))
def test_a_period_keys_name_never_is_a_standing_keys_name(tenant: str, subject: str, label: str) -> None:
    ref = subject_ref(tenant, subject)
    assert period_ref(ref, label) != ref and period_ref(ref, label)[0] == "p" and ref[0].isdigit()


def test_the_longest_need_comes_from_the_lifetime_settings_in_one_place() -> None:
    assert Settings(retention_enabled=False).log_key_keep_ms() is None  # conversations live until purged
    assert Settings(retention_enabled=True).log_key_keep_ms() == 60 * DAY  # main's 60 days, the longest
    short = Settings(
        retention_enabled=True,
        retention_main_days=1,
        retention_task_days=1,
        retention_subagent_days=1,
        retention_generation_seconds=86_400,
        trace_days=2,
        chat_ttl_seconds=3600,
    )
    assert short.log_key_keep_ms() == 2 * DAY  # traces', the longest of these
    # main's older generations feed on the same records: their age limit counts too
    assert short.model_copy(update={"retention_generation_seconds": 3 * 86_400}).log_key_keep_ms() == 3 * DAY
    assert longest_need_ms((10, 20), 5, 15) == 20 and longest_need_ms((10,), 5, None) is None
    assert due("m2026-11", 0, NOW) and not due("m2026-11", 1, NOW) and not due("m2026-11", None, NOW * 2)


def _at(event: ThreadEvent, at: int) -> ThreadEvent:
    return dataclasses.replace(event, envelope=dataclasses.replace(event.envelope, occurred_at=at))


@given(
    events=st.lists(thread_events(), min_size=1, max_size=8),
    days_ago=st.lists(st.integers(0, 400), min_size=8, max_size=8),
    periods=periods_of,
    keep_days=st.integers(0, 90),
)
@settings(max_examples=150, deadline=None)
def test_sealed_events_open_by_their_period_until_it_is_shredded(
    events: list[ThreadEvent], days_ago: list[int], periods: KeyPeriods, keep_days: int
) -> None:
    """Property: each event is sealed under the key of its own period (named in its sealed field), opens
    with it through the Avro encoding, and reads as period-shredded exactly when its period is due."""

    async def run() -> None:
        vault = InMemoryKeyVault(os.urandom(32), periods=periods)
        sealer = Sealer(vault, cache_seconds=0, periods=periods)
        timed = [_at(event, NOW - ago * DAY) for event, ago in zip(events, days_ago, strict=False)]
        sealed = [(e.TYPE, CODEC.decode(CODEC.encode(e.TYPE, await sealer.seal(e.TYPE, to_record(e))))) for e in timed]
        expected: list[str | None] = []
        for event, (_, decoded) in zip(timed, sealed, strict=True):
            box = decoded.record["envelope"]["sealed"]
            if not needs_seal(event.TYPE):
                assert box is None
                expected.append(None)
                continue
            label = period_of(box["key_id"])
            at = event.envelope.occurred_at
            if event.TYPE in PERIOD_SEALED and event.envelope.subject is not None:
                assert label == periods.label(at)
            else:
                assert label is None  # a standing key: the tenant's, or a fact's subject's
            expected.append(label)
        shredded = await shred_due_periods(vault, None, keep_days * DAY, NOW)
        results = await sealer.open_many([(name, decoded.record) for name, decoded in sealed])
        gone = set()
        for event, label, result in zip(timed, expected, results, strict=True):
            if label is not None and due(label, keep_days * DAY, NOW):
                assert isinstance(result, PeriodShredded) and result.period == label
                gone.add(label)
            else:
                assert isinstance(result, dict) and from_record(event.TYPE, result) == event
        assert shredded >= len(gone)

    asyncio.run(run())


async def test_a_record_sealed_under_the_single_subject_key_still_opens() -> None:
    """The upgrade path: records sealed before period keys name the subject's standing key, which stays
    until the subject is erased; shredding periods never touches it."""
    vault = InMemoryKeyVault(os.urandom(32))
    sealer = Sealer(vault, cache_seconds=0)
    event = QuestionAsked(Envelope(tenant="t", subject="ann", thread="session", producer="p"), "x", "the old one")
    key_id, key = await vault.key_for_write("t", "ann")  # as every record was sealed before
    old = seal(event.TYPE, to_record(event), key_id, key)
    new_event = _at(QuestionAsked(Envelope(tenant="t", subject="ann", thread="session", producer="p"), "y", "new"), NOW)
    new = await sealer.seal(new_event.TYPE, to_record(new_event))
    assert period_of(new["envelope"]["sealed"]["key_id"]) == "m2026-12"
    assert await shred_due_periods(vault, None, 0, NOW + 40 * DAY) == 1
    opened_old, opened_new = await sealer.open_many([(event.TYPE, old), (new_event.TYPE, new)])
    assert isinstance(opened_old, dict) and from_record(event.TYPE, opened_old) == event
    assert isinstance(opened_new, PeriodShredded)
    await vault.begin_erasure("t", "ann")
    await vault.delete("t", "ann")
    (erased,) = await Sealer(vault, cache_seconds=0).open_many([(event.TYPE, old)])
    assert isinstance(erased, Shredded) and not isinstance(erased, PeriodShredded)


async def test_the_scheduled_step_ledgers_what_it_shredded_and_nothing_when_none_is_due() -> None:
    vault, ledger = InMemoryKeyVault(os.urandom(32)), InMemoryLedger(os.urandom(32))
    for subject in ("ann", "bob"):
        await vault.key_for_write("t", subject, NOW - 100 * DAY)
        await vault.key_for_write("t", subject, NOW)
    assert await shred_due_periods(vault, ledger, None, NOW * 2) == 0  # retention disabled: never
    assert await shred_due_periods(vault, ledger, 60 * DAY, NOW) == 2  # August's, not December's
    assert await shred_due_periods(vault, ledger, 60 * DAY, NOW) == 0
    entries = await ledger.entries(kind="period-keys-shredded")
    assert len(entries) == 1 and entries[0]["keys"] == 2 and entries[0]["by"] == "schedule"
    assert "ann" not in repr(entries)


async def test_a_receipt_is_sealed_by_its_period_and_outlived_by_its_key() -> None:
    """A receipt lives MEMLOG_TRACE_DAYS from itself, so it takes the key of its period: once that key is
    due the receipt it sealed has expired from the store, and its record no longer opens."""
    settings = Settings(
        retention_enabled=True,
        trace_days=2,
        retention_main_days=1,
        retention_task_days=1,
        retention_subagent_days=1,
        retention_generation_seconds=86_400,
        chat_ttl_seconds=3600,
    )
    keep = settings.log_key_keep_ms()
    assert keep is not None
    vault = InMemoryKeyVault(os.urandom(32), periods=KeyPeriods(86_400))
    sealer = Sealer(vault, cache_seconds=0, periods=KeyPeriods(86_400))
    env = Envelope(tenant="t", subject="ann", thread="session", producer="p", occurred_at=NOW - 10 * DAY)
    receipt = ReceiptRecorded(env, "rc-1", "x1", 0, "passed", "ann's chest holds 3 keys")
    sealed = await sealer.seal(receipt.TYPE, to_record(receipt))
    label = period_of(sealed["envelope"]["sealed"]["key_id"])
    assert label == KeyPeriods(86_400).label(env.occurred_at)
    stored = receipt_document(receipt, Position("traces", 0, 1), settings.redactor(), settings.trace_days)
    assert stored["expires_at"] <= period_range(label)[1] + keep  # the receipt goes before its key
    (opened,) = await sealer.open_many([(receipt.TYPE, sealed)])
    assert isinstance(opened, dict) and from_record(receipt.TYPE, opened) == receipt
    assert await shred_due_periods(vault, None, keep, NOW) == 1
    (gone,) = await Sealer(vault, cache_seconds=0).open_many([(receipt.TYPE, sealed)])
    assert isinstance(gone, PeriodShredded) and gone.period == label
