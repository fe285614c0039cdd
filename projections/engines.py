"""The ports of what a use case calls besides the stores: the summarizer, the embedding model (and the read
path's question encoder in front of it) and the signals of moved checkpoints. Their classes live in
adapters/ (summarizers, embeddings, redis_signals); a use case knows them by these names alone."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from projections.session import Exchange
from schemas.errors import MemlogError


class SummarizerFailed(MemlogError):
    """The summarizer did not produce a summary; the thread stays unfolded and is retried later."""


class Summarizer(Protocol):
    name: str

    async def summarize(self, previous: str, folded: Sequence[Exchange], limit: int) -> str: ...


class EmbeddingFailed(MemlogError):
    """The embedding model could not embed; recall falls back to keywords."""


class Embedder(Protocol):
    name: str  # stored with every vector, so spaces of different models never mix

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class QuestionEncoding(Embedder, Protocol):
    """The read path's embedder: a question's vector, cached and batched with other readers' questions."""

    async def vector(self, text: str) -> list[float]: ...


class CheckpointSignals(Protocol):
    """Wakes waiters when a projection's checkpoint moves (a waiter checks again either way)."""

    @property
    def live(self) -> bool: ...

    def armed(self) -> asyncio.Event: ...

    async def wait(self, moved: asyncio.Event, seconds: float) -> None: ...

    async def close(self) -> None: ...
