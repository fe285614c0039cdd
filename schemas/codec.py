"""Avro codec: single-object encoding by default, Confluent wire format with a schema registry.

Single-object encoding (Avro spec): 0xC3 0x01, the 8-byte little-endian CRC-64-AVRO
fingerprint of the writer schema, then the Avro body. Any consumer holding schemas/
decodes it without a registry. Confluent wire format: 0x00, a 4-byte big-endian schema
id, then the body. The decoder reads both, whatever the configuration.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass
from typing import Any, Protocol

from fastavro import schemaless_reader, schemaless_writer

from schemas.catalog import Catalog, SchemaVersion, version_of
from schemas.errors import DecodeError, InvalidEvent, UnknownSchema

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = 0


class SchemaRegistry(Protocol):
    """The two calls memlog makes to a Confluent-compatible schema registry."""

    def register(self, subject: str, schema: str) -> int: ...

    def schema_by_id(self, schema_id: int) -> str: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Decoded:
    full_name: str
    version: int
    record: dict[str, Any]


class Codec:
    """Encodes and decodes memlog events against the catalog."""

    def __init__(self, catalog: Catalog, registry: SchemaRegistry | None = None) -> None:
        self.catalog = catalog
        self.registry = registry
        self._ids: dict[str, int] = {}
        self._by_id: dict[int, SchemaVersion] = {}

    def encode(self, full_name: str, record: dict[str, Any]) -> bytes:
        writer = self.catalog.writer(full_name)
        out = io.BytesIO()
        if self.registry is None:
            out.write(SINGLE_OBJECT_MAGIC)
            out.write(writer.fingerprint)
        else:
            out.write(struct.pack(">bI", CONFLUENT_MAGIC, self._registered_id(writer)))
        try:
            schemaless_writer(out, writer.parsed, record, strict_allow_default=True)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise InvalidEvent(full_name, f"does not match its schema: {exc}") from exc
        return out.getvalue()

    def decode(self, data: bytes | None) -> Decoded:
        if not data:
            raise DecodeError("empty record value")
        if data[:2] == SINGLE_OBJECT_MAGIC:
            if len(data) < 10:
                raise DecodeError("truncated single-object header")
            writer = self.catalog.by_print(data[2:10])
            body = data[10:]
        elif data[0] == CONFLUENT_MAGIC:
            if len(data) < 5:
                raise DecodeError("truncated Confluent header")
            (schema_id,) = struct.unpack(">I", data[1:5])
            writer = self._schema_for_id(schema_id)
            body = data[5:]
        else:
            raise DecodeError(f"not a memlog event: first bytes {data[:2].hex()}")
        reader = self.catalog.current.get(writer.full_name, writer)
        stream = io.BytesIO(body)
        try:
            record = schemaless_reader(stream, writer.parsed, reader.parsed)
        except Exception as exc:  # fastavro raises many kinds on corrupt bodies
            raise DecodeError(f"corrupt {writer.full_name} body: {exc!r}") from exc
        if stream.tell() != len(body):
            raise DecodeError(f"{len(body) - stream.tell()} trailing bytes after a {writer.full_name} body")
        if not isinstance(record, dict):
            raise DecodeError(f"{writer.full_name} body is not a record")
        return Decoded(reader.full_name, reader.version, record)

    def close(self) -> None:
        if self.registry is not None:
            self.registry.close()

    def _registered_id(self, writer: SchemaVersion) -> int:
        cached = self._ids.get(writer.full_name)
        if cached is None:
            assert self.registry is not None
            # RecordNameStrategy: one topic carries several event types.
            cached = self.registry.register(writer.full_name, writer.canonical)
            self._ids[writer.full_name] = cached
            self._by_id[cached] = writer
        return cached

    def _schema_for_id(self, schema_id: int) -> SchemaVersion:
        known = self._by_id.get(schema_id)
        if known is not None:
            return known
        if self.registry is None:
            raise UnknownSchema(f"schema id {schema_id} needs a schema registry, and none is configured")
        version = version_of(json.loads(self.registry.schema_by_id(schema_id)))
        known = self.catalog.by_fingerprint.get(version.fingerprint, version)
        self._by_id[schema_id] = known
        return known
