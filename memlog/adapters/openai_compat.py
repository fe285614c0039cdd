"""The HTTP client both OpenAI-compatible adapters (summaries, embeddings) use."""

from __future__ import annotations

import httpx


def openai_client(url: str, api_key: str | None, timeout: float) -> httpx.AsyncClient:
    """A client for a base URL ending in /v1, sending the key as a bearer token when there is one."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout, headers=headers)
