"""Crypto-shredding's pure part: sealed events round-trip through Avro, and open only with their key."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlog.adapters.in_memory import InMemoryKeyVault
from projections.sealing import (
    PERSONAL,
    SealError,
    new_data_key,
    open_sealed,
    put_personal,
    seal,
    take_personal,
    unwrap_key,
    wrap_key,
)
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import Envelope, ModelStep, RunTraced, ThreadEvent, from_record, to_record
from streams.sealer import Sealer
from tests.unit.strategies import thread_events

CODEC = Codec(Catalog())
KEY = new_data_key()


@given(thread_events())
@settings(max_examples=300, deadline=None)
def test_a_sealed_event_round_trips_and_hides_every_personal_field(event: ThreadEvent) -> None:
    record = to_record(event)
    if event.TYPE not in PERSONAL or event.envelope.subject is None:
        return
    sealed = seal(event.TYPE, record, "k1", KEY)
    decoded = CODEC.decode(CODEC.encode(event.TYPE, sealed))
    _, values = take_personal(event.TYPE, record)
    _, blanks = take_personal(event.TYPE, decoded.record)
    assert all(blank in ("", None) for blank in blanks)  # nothing personal travels in clear
    assert len(blanks) == len(values)
    assert from_record(decoded.full_name, open_sealed(decoded.full_name, decoded.record, KEY)) == event


@given(st.lists(st.text(), max_size=5))
def test_personal_values_go_back_where_they_came_from(prompts: list[str]) -> None:
    record = {"envelope": {}, "steps": [{"prompt": p, "output": p[::-1], "seq": i} for i, p in enumerate(prompts)]}
    record["tool_calls"] = []
    clear, values = take_personal("memlog.RunTraced", record)
    assert put_personal("memlog.RunTraced", clear, values) == record


def test_lone_surrogates_and_nul_survive_sealing() -> None:
    from schemas.events import Envelope, QuestionAsked

    event = QuestionAsked(Envelope(tenant="t", subject="s", thread="session", producer="p"), "x", "a\x00b\ud800c")
    record = seal(event.TYPE, to_record(event), "k1", KEY)
    assert from_record(event.TYPE, open_sealed(event.TYPE, record, KEY)) == event


def test_another_key_or_another_event_does_not_open_it() -> None:
    from schemas.events import Envelope, QuestionAsked

    event = QuestionAsked(Envelope(tenant="t", subject="s", thread="session", producer="p"), "x", "secret")
    record = seal(event.TYPE, to_record(event), "k1", KEY)
    with pytest.raises(SealError):
        open_sealed(event.TYPE, record, new_data_key())
    moved = json.loads(json.dumps(record, default=lambda b: b.hex()))  # the same box on another event id
    moved["envelope"]["event_id"] = "00000000-0000-0000-0000-000000000000"
    moved["envelope"]["sealed"] = record["envelope"]["sealed"]
    with pytest.raises(SealError):
        open_sealed(event.TYPE, moved, KEY)


def test_a_data_key_unwraps_only_with_its_master_key_and_entry() -> None:
    master, data_key = new_data_key(), new_data_key()
    nonce, wrapped = wrap_key(master, "3:t:s\x1fk1", data_key)
    assert unwrap_key(master, "3:t:s\x1fk1", nonce, wrapped) == data_key
    with pytest.raises(SealError):
        unwrap_key(new_data_key(), "3:t:s\x1fk1", nonce, wrapped)
    with pytest.raises(SealError):
        unwrap_key(master, "3:t:other\x1fk1", nonce, wrapped)


async def test_a_run_without_a_subject_travels_sealed_under_its_tenants_key() -> None:
    vault = InMemoryKeyVault(os.urandom(32))
    sealer = Sealer(vault)
    env = Envelope(tenant="castle", agent="helper", thread="automation", producer="p")
    run = RunTraced(env, "run-1", "ok", 0, 1, (ModelStep(0, "m", "the door code is 4711", "opened", 1, 1, 0, 1),))
    record = await sealer.seal(run.TYPE, to_record(run))
    decoded = CODEC.decode(CODEC.encode(run.TYPE, record))
    secret = "the door code is 4711"  # the phrase, not its digits: a random event id may hold "4711"
    assert secret.encode() not in CODEC.encode(run.TYPE, record)
    assert secret not in json.dumps(decoded.record, default=str)
    tenant_key = await vault.key_for_write("castle", None)
    assert decoded.record["envelope"]["sealed"]["key_id"] == tenant_key[0]
    (opened,) = await sealer.open_many([(decoded.full_name, decoded.record)])
    assert isinstance(opened, dict) and from_record(run.TYPE, opened) == run
