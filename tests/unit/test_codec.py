"""Avro codec: single-object encoding, Confluent framing, and stored fixtures of every schema version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings

from schemas.catalog import Catalog
from schemas.codec import SINGLE_OBJECT_MAGIC, Codec
from schemas.errors import DecodeError, InvalidEvent, UnknownSchema
from schemas.events import ThreadEvent, from_record, millis, to_record
from tests.unit.strategies import thread_events

FIXTURES = Path(__file__).parents[1] / "fixtures" / "avro"
CATALOG = Catalog()
CODEC = Codec(CATALOG)


def crc64_avro(data: bytes) -> int:
    """The Avro spec's reference fingerprint algorithm, written out independently of fastavro."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


@given(thread_events())
@settings(max_examples=300, deadline=None)
def test_every_event_round_trips_through_avro(event: ThreadEvent) -> None:
    decoded = CODEC.decode(CODEC.encode(event.TYPE, to_record(event)))
    assert decoded.full_name == event.TYPE
    assert from_record(decoded.full_name, decoded.record) == event


def test_single_object_header_carries_the_spec_fingerprint() -> None:
    for name in CATALOG.names():
        writer = CATALOG.writer(name)
        expected = crc64_avro(writer.canonical.encode()).to_bytes(8, "little")
        assert writer.fingerprint == expected
        # the canonical form inlines the envelope, so a consumer with schemas/ alone can decode
        if name != "memlog.DeadLetter":
            assert '"name":"memlog.Envelope"' in writer.canonical


def test_encoded_bytes_start_with_the_single_object_marker() -> None:
    record = json.loads((FIXTURES / "records.json").read_text())["memlog.QuestionAsked"]
    data = CODEC.encode("memlog.QuestionAsked", record)
    assert data[:2] == SINGLE_OBJECT_MAGIC
    assert data[2:10] == CATALOG.writer("memlog.QuestionAsked").fingerprint


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/*.bin")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_stored_fixtures_of_every_version_decode_with_the_current_schema(path: Path) -> None:
    expected = json.loads(path.with_suffix(".json").read_text())
    decoded = CODEC.decode(path.read_bytes())
    assert decoded.full_name == path.stem
    record = _plain(decoded.record)
    assert isinstance(record, dict)
    # fields added since that version read as their defaults (BACKWARD_TRANSITIVE)
    fields = CATALOG.writer(path.stem).raw["fields"]
    added = {f["name"]: f["default"] for f in fields if f["name"] not in expected}
    if "envelope" in expected:
        envelope = next(f["type"] for f in fields if f["name"] == "envelope")
        expected["envelope"].update(
            {f["name"]: f["default"] for f in envelope["fields"] if f["name"] not in expected["envelope"]}
        )
    assert record == {**expected, **added}


def test_fixtures_exist_for_every_current_type() -> None:
    stored = {p.stem for p in FIXTURES.glob("*/*.bin")}
    assert set(CATALOG.names()) <= stored


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"garbage bytes", "not a memlog event"),
        (b"\xc3\x01\x00", "truncated"),
        (b"\xc3\x01" + b"\x00" * 8 + b"body", "unknown schema fingerprint"),
        (b"\x00\x00\x00\x00\x07body", "needs a schema registry"),
    ],
)
def test_undecodable_bytes_raise_a_named_error(data: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        CODEC.decode(data)


def test_a_truncated_body_is_refused() -> None:
    record = json.loads((FIXTURES / "records.json").read_text())["memlog.AnswerGiven"]
    data = CODEC.encode("memlog.AnswerGiven", record)
    with pytest.raises(DecodeError):
        CODEC.decode(data[:-3])
    with pytest.raises(DecodeError, match="trailing"):
        CODEC.decode(data + b"\x00")


def test_a_record_that_misses_a_field_is_refused_by_name() -> None:
    with pytest.raises(InvalidEvent, match=r"memlog\.QuestionAsked"):
        CODEC.encode("memlog.QuestionAsked", {"exchange_id": "x"})
    with pytest.raises(UnknownSchema):
        CODEC.encode("memlog.Nope", {})


def _plain(value: object) -> object:
    """Decoded records hold datetimes and UUIDs; fixtures hold their JSON forms."""
    import datetime as dt
    import uuid

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime):
        return millis(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return value
