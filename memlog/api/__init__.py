"""The HTTP API: record exchanges, read context. OpenAPI at /openapi.json."""

from memlog.api.app import create_api

__all__ = ["create_api"]
