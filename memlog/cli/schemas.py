"""`memlog schemas register`: every event type's current schema in the registry, with a compatibility
level set, before any producer needs them (memlog's own producer registers a type on first use)."""

from __future__ import annotations

import argparse

from memlog.config.settings import Settings
from schemas.catalog import Catalog
from schemas.errors import InvalidEvent
from schemas.registry import HttpSchemaRegistry

LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE")


def register_schemas(settings: Settings, args: argparse.Namespace) -> list[tuple[str, int]]:
    """(subject, schema id) of each event type, registered under its full name (RecordNameStrategy)."""
    url = args.url or settings.schema_registry_url
    if not url:
        raise InvalidEvent("schema_registry_url", "set MEMLOG_SCHEMA_REGISTRY_URL or pass --url")
    registry = HttpSchemaRegistry(url)
    try:
        registered = []
        catalog = Catalog()
        for name in catalog.names():
            schema_id = registry.register(name, catalog.writer(name).canonical)
            registry.set_compatibility(name, args.compatibility)
            registered.append((name, schema_id))
        return registered
    finally:
        registry.close()
