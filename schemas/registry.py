"""HTTP client for the Confluent-compatible schema registry API (Confluent, Apicurio's ccompat, Karapace)."""

from __future__ import annotations

import json

import httpx

from schemas.errors import LogUnavailable, UnknownSchema

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class HttpSchemaRegistry:
    """The calls memlog makes: register a schema under a subject, set a subject's compatibility level,
    and fetch a schema by id.

    Args:
        url: base URL of the Confluent-compatible API, e.g. ``http://host:8081`` or
            Apicurio's ``http://host:8080/apis/ccompat/v7``.
        timeout: seconds for each HTTP call.
    """

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self._client = httpx.Client(base_url=url.rstrip("/"), timeout=timeout, headers={"Content-Type": CONTENT_TYPE})

    def register(self, subject: str, schema: str) -> int:
        try:
            response = self._client.post(f"/subjects/{subject}/versions", content=json.dumps({"schema": schema}))
        except httpx.HTTPError as exc:
            raise LogUnavailable(f"schema registry unreachable: {exc}") from exc
        if response.status_code >= 300:
            raise LogUnavailable(f"schema registry refused {subject}: {response.status_code} {response.text[:200]}")
        return int(response.json()["id"])

    def set_compatibility(self, subject: str, level: str) -> None:
        """The level the registry checks each new version of `subject` against (BACKWARD, FULL, ...)."""
        try:
            response = self._client.put(f"/config/{subject}", content=json.dumps({"compatibility": level}))
        except httpx.HTTPError as exc:
            raise LogUnavailable(f"schema registry unreachable: {exc}") from exc
        if response.status_code >= 300:
            raise LogUnavailable(
                f"schema registry refused {level} for {subject}: {response.status_code} {response.text[:200]}"
            )

    def compatibility(self, subject: str) -> str | None:
        try:
            response = self._client.get(f"/config/{subject}")
        except httpx.HTTPError as exc:
            raise LogUnavailable(f"schema registry unreachable: {exc}") from exc
        if response.status_code == 404:
            return None
        body = response.json()
        level = body.get("compatibilityLevel") or body.get("compatibility")
        return None if level is None else str(level)

    def schema_by_id(self, schema_id: int) -> str:
        try:
            response = self._client.get(f"/schemas/ids/{schema_id}")
        except httpx.HTTPError as exc:
            raise LogUnavailable(f"schema registry unreachable: {exc}") from exc
        if response.status_code == 404:
            raise UnknownSchema(f"schema id {schema_id} is not in the registry")
        if response.status_code >= 300:
            raise LogUnavailable(f"schema registry error for id {schema_id}: {response.status_code}")
        return str(response.json()["schema"])

    def close(self) -> None:
        self._client.close()
