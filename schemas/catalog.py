"""Loads the .avsc files under schemas/avro (current) and schemas/avro/history (past versions).

Every record schema is stored with its named references inlined, because the Avro
fingerprint (and so single-object encoding) is computed over the full canonical form.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from schemas.errors import UnknownSchema

AVRO_DIR = Path(__file__).parent / "avro"
HISTORY_DIR = AVRO_DIR / "history"
VERSION_PROPERTY = "memlog.version"
# Types that only appear inside events, never alone on a topic.
EMBEDDED_TYPES = frozenset({"memlog.Envelope"})


@dataclass(frozen=True)
class SchemaVersion:
    """One version of one event type, ready to read or write."""

    full_name: str
    version: int
    raw: dict[str, Any]
    parsed: Any
    canonical: str
    fingerprint: bytes  # 8 bytes, little-endian CRC-64-AVRO, as single-object encoding writes it


def _full_name(schema: dict[str, Any]) -> str:
    name = str(schema["name"])
    namespace = schema.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _inline(node: Any, library: dict[str, dict[str, Any]], seen: set[str]) -> Any:
    """Replace references to named types by their definition, the first time each appears."""
    if isinstance(node, str):
        if node in library and node not in seen:
            seen.add(node)
            return _inline(copy.deepcopy(library[node]), library, seen)
        return node
    if isinstance(node, list):
        return [_inline(item, library, seen) for item in node]
    if isinstance(node, dict):
        if node.get("type") in ("record", "enum", "fixed") and "name" in node:
            seen.add(_full_name(node))
        return {
            key: (_inline(value, library, seen) if key in ("type", "fields", "items", "values") else value)
            for key, value in node.items()
        }
    return node


def _load_dir(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.avsc"))]


def version_of(raw: dict[str, Any]) -> SchemaVersion:
    parsed = parse_schema(raw, named_schemas={})
    canonical = to_parsing_canonical_form(parsed)
    return SchemaVersion(
        full_name=_full_name(raw),
        version=int(raw.get(VERSION_PROPERTY, 1)),
        raw=raw,
        parsed=parsed,
        canonical=canonical,
        fingerprint=bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO")),
    )


class Catalog:
    """Every known version of every event type, by name and by fingerprint."""

    def __init__(self, avro_dir: Path = AVRO_DIR) -> None:
        current = _load_dir(avro_dir)
        library = {_full_name(raw): raw for raw in current}
        self.current: dict[str, SchemaVersion] = {}
        self.by_fingerprint: dict[bytes, SchemaVersion] = {}
        for raw in current:
            name = _full_name(raw)
            if name in EMBEDDED_TYPES:
                continue
            version = version_of(_inline(raw, library, set()))
            self.current[name] = version
            self.by_fingerprint[version.fingerprint] = version
        history = avro_dir / "history"
        if history.is_dir():
            for raw in _load_dir(history):
                version = version_of(_inline(raw, library, set()))
                self.by_fingerprint.setdefault(version.fingerprint, version)

    def writer(self, full_name: str) -> SchemaVersion:
        try:
            return self.current[full_name]
        except KeyError:
            raise UnknownSchema(f"no schema named {full_name!r} under schemas/avro") from None

    def by_print(self, print_: bytes) -> SchemaVersion:
        try:
            return self.by_fingerprint[print_]
        except KeyError:
            raise UnknownSchema(f"unknown schema fingerprint {print_.hex()}") from None

    def names(self) -> list[str]:
        return sorted(self.current)
