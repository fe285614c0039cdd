"""Seed 003's fallbacks on the real stack: "a failing embedder falls back and loses nothing; the fact is
re-embedded later".

memlog's worker and API run as processes with MEMLOG_EMBEDDINGS=openai, pointed at an OpenAI-compatible
embeddings server this module runs on a loopback port. The server computes real vectors with the local
all-MiniLM-L6-v2 and can be switched to answer HTTP 500 or to refuse connections (its socket closed).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from memlog.adapters.embeddings import LocalMiniLM
from memlog.config.settings import Settings
from memlog.dev.processes import free_port, settings_env
from memlog.services import open_services
from projections.facts import SubjectFacts
from projections.recall import cosine
from tests.e2e.conftest import memlog, own_settings
from tests.e2e.reads import until_ok

MODEL = "minilm"
VECTOR_MODEL = f"openai:{MODEL}"  # what memlog stores with each vector from this endpoint
TENANT = "castle"

FACT = "my dog is called Rex"
KEYWORD_QUESTION = "what is my dog called?"  # shares "dog" (and "called") with FACT
PARAPHRASE = "what is the name of my puppy?"  # shares no indexed word with FACT; found only by meaning
OTHER_PARAPHRASE = "what name did I give my puppy?"  # another, never asked before in a test
OTHER_FACT = "I prefer short answers"


@dataclass(frozen=True)
class Call:
    texts: list[str]
    authorization: str | None
    status: int


class EmbeddingServer:
    """`POST /v1/embeddings` as OpenAI answers it, with vectors from the real local MiniLM.

    working: 200 with vectors; failing: HTTP 500; refusing: the listening socket is closed, so a
    connection is refused. Every request it answers is recorded."""

    def __init__(self, model: LocalMiniLM) -> None:
        self.model = model
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.failing = False
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body: dict[str, Any]
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                texts = request.get("input", [])
                texts = [texts] if isinstance(texts, str) else list(texts)
                if self.path != "/v1/embeddings":
                    status, body = 404, {"error": {"message": f"no route {self.path}"}}
                elif owner.failing:
                    status, body = 500, {"error": {"message": "the embedding model is down", "type": "server_error"}}
                else:
                    vectors = owner.model.encode(texts) if texts else []
                    status, body = (
                        200,
                        {
                            "object": "list",
                            "model": request.get("model"),
                            "data": [
                                {"object": "embedding", "index": index, "embedding": vector}
                                for index, vector in enumerate(vectors)
                            ],
                            "usage": {"prompt_tokens": 0, "total_tokens": 0},
                        },
                    )
                with owner._lock:
                    owner.calls.append(Call(texts, self.headers.get("Authorization"), status))
                self._answer(status, body)

        return Handler

    def serve(self) -> None:
        """Listening (again, on the same port) and working."""
        self.failing = False
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
            self._server.daemon_threads = True
            self._thread = threading.Thread(target=self._server.serve_forever, name="embeddings", daemon=True)
            self._thread.start()

    def fail(self) -> None:
        self.serve()
        self.failing = True

    def refuse(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            assert self._thread is not None
            self._thread.join()
            self._server = self._thread = None

    def switch(self, mode: str) -> None:
        {"working": self.serve, "failing": self.fail, "refusing": self.refuse}[mode]()

    def answered(self, text: str) -> list[int]:
        """The statuses of the requests that asked for `text`'s vector."""
        with self._lock:
            return [call.status for call in self.calls if text in call.texts]


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLM:
    return LocalMiniLM()


@pytest.fixture(scope="module")
def server(minilm: LocalMiniLM) -> Iterator[EmbeddingServer]:
    running = EmbeddingServer(minilm)
    running.serve()
    yield running
    running.refuse()


@pytest.fixture(scope="module")
def live(stack: Settings, server: EmbeddingServer) -> Iterator[Settings]:
    settings = own_settings(
        stack,
        embeddings="openai",
        embeddings_url=server.url,
        embeddings_model=MODEL,
        embeddings_api_key="test",
    )
    env = settings_env(settings)
    assert (env["MEMLOG_EMBEDDINGS"], env["MEMLOG_EMBEDDINGS_URL"]) == ("openai", server.url)
    assert (env["MEMLOG_EMBEDDINGS_MODEL"], env["MEMLOG_EMBEDDINGS_API_KEY"]) == (MODEL, "test")
    with memlog(settings):
        yield settings


@pytest.fixture
def embedder(server: EmbeddingServer) -> Iterator[EmbeddingServer]:
    """The module's server, back to working after each test whatever the test left it as."""
    yield server
    server.serve()


async def remember(http: httpx.AsyncClient, subject: str, text: str) -> str:
    response = await http.post(f"/v1/tenants/{TENANT}/subjects/{subject}/facts", json={"text": text})
    assert response.status_code == 202, response.text
    position: str = response.json()["position"]
    return position


async def listed(http: httpx.AsyncClient, subject: str, after: str) -> list[str]:
    """The subject's facts once the worker has projected `after`."""
    url = f"/v1/tenants/{TENANT}/subjects/{subject}/facts"
    response = await until_ok(http, url, {"after": after})
    assert response.status_code == 200, response.text
    return [fact["text"] for fact in response.json()["facts"]]


async def recalled(http: httpx.AsyncClient, subject: str, question: str) -> list[tuple[str, str]]:
    """The context read's facts that bear on the question as (text, how); the read must answer 200
    whatever the embedder does (the others it gives, not matched, are left out here)."""
    response = await http.get(
        f"/v1/tenants/{TENANT}/subjects/{subject}/context", params={"question": question, "agent": "allay"}
    )
    assert response.status_code == 200, response.text
    return [(fact["text"], fact["how"]) for fact in response.json()["facts"] if fact["bears"]]


async def stored(settings: Settings, subject: str) -> SubjectFacts:
    async with open_services(settings) as services:
        state = await services.facts.load(TENANT, subject)
    assert state is not None
    return state


def vectors_of(state: SubjectFacts) -> dict[str, tuple[str, int]]:
    return {fact.text: (fact.vector_model, len(fact.vector)) for fact in state.facts}


@pytest.mark.parametrize("failure", ["failing", "refusing"])
async def test_with_the_embedder_down_a_fact_is_kept_without_a_vector_and_recalled_by_its_words(
    http: httpx.AsyncClient, live: Settings, embedder: EmbeddingServer, failure: str
) -> None:
    subject = f"ada-{failure}"
    embedder.switch(failure)
    position = await remember(http, subject, FACT)
    assert await listed(http, subject, position) == [FACT]  # projected and listed: nothing lost
    assert vectors_of(await stored(live, subject)) == {FACT: ("", 0)}
    if failure == "failing":
        assert 500 in embedder.answered(FACT)  # the worker did ask, and was answered 500
    assert await recalled(http, subject, KEYWORD_QUESTION) == [(FACT, "keyword")]


async def test_once_the_embedder_is_back_a_read_embeds_the_stale_fact_and_the_next_fact_event_stores_its_vector(
    http: httpx.AsyncClient, live: Settings, embedder: EmbeddingServer, minilm: LocalMiniLM
) -> None:
    subject = "bo"
    embedder.fail()
    first = await remember(http, subject, FACT)
    assert await listed(http, subject, first) == [FACT]
    assert vectors_of(await stored(live, subject)) == {FACT: ("", 0)}

    embedder.serve()
    assert await recalled(http, subject, PARAPHRASE) == [(FACT, "similarity")]
    # the read embedded the question, and the fact lacking this model's vector, with memlog's key
    done = [call for call in embedder.calls if call.status == 200]
    assert [PARAPHRASE] in [call.texts for call in done] and [FACT] in [call.texts for call in done]
    assert {call.authorization for call in done} == {"Bearer test"}
    # a read stores nothing: the fact still has no vector until the worker writes the subject again
    assert vectors_of(await stored(live, subject)) == {FACT: ("", 0)}

    second = await remember(http, subject, OTHER_FACT)
    assert sorted(await listed(http, subject, second)) == sorted([FACT, OTHER_FACT])
    state = await stored(live, subject)
    assert vectors_of(state) == {FACT: (VECTOR_MODEL, 384), OTHER_FACT: (VECTOR_MODEL, 384)}
    (kept,) = [fact for fact in state.facts if fact.text == FACT]
    assert cosine(kept.vector, minilm.encode([FACT])[0]) > 0.999  # the endpoint's vector for that text
    # and with vectors stored, a paraphrase still finds it, and no fact is embedded by the read any more
    before = len(embedder.calls)
    assert await recalled(http, subject, OTHER_PARAPHRASE) == [(FACT, "similarity")]
    assert [call.texts for call in embedder.calls[before:]] == [[OTHER_PARAPHRASE]]


@pytest.mark.parametrize("failure", ["failing", "refusing"])
async def test_an_embedder_failing_after_facts_were_embedded_leaves_reads_answering_by_keyword(
    http: httpx.AsyncClient, live: Settings, embedder: EmbeddingServer, failure: str
) -> None:
    subject = f"cy-{failure}"
    embedder.serve()
    await remember(http, subject, FACT)
    position = await remember(http, subject, OTHER_FACT)
    assert sorted(await listed(http, subject, position)) == sorted([FACT, OTHER_FACT])
    assert vectors_of(await stored(live, subject)) == {FACT: (VECTOR_MODEL, 384), OTHER_FACT: (VECTOR_MODEL, 384)}
    assert await recalled(http, subject, PARAPHRASE) == [(FACT, "similarity")]

    embedder.switch(failure)
    assert await recalled(http, subject, KEYWORD_QUESTION) == [(FACT, "keyword")]
    # a question asked before keeps its cached vector: still found by meaning while the model is away
    assert await recalled(http, subject, PARAPHRASE) == [(FACT, "similarity")]
    # a paraphrase never asked while the model worked shares no word: by words alone nothing bears on
    # it, and the read still answers
    assert await recalled(http, subject, "my puppy's name, please?") == []
    # the stored vectors are untouched by the failure
    assert vectors_of(await stored(live, subject)) == {FACT: (VECTOR_MODEL, 384), OTHER_FACT: (VECTOR_MODEL, 384)}
