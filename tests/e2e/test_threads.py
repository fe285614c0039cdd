"""Seed 000's thread rules on the real broker and Redis, through memlog's own worker and API processes."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from memlog.adapters.redis_store import thread_base
from memlog.config.settings import Settings
from memlog.dev.processes import start_worker
from projections.session import ThreadKey
from projections.tokens import TokenCounter
from schemas.events import now_ms
from tests.e2e.conftest import LOGS, StartMemlog, api_client, memlog, own_settings

HOUR_MS = 3_600_000


def filler(tokens: int, tag: str) -> str:
    """Text of about `tokens` cl100k tokens (" zz" is one token)."""
    return f"{tag}:" + " zz" * tokens


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog()


async def post(http: httpx.AsyncClient, **payload: Any) -> dict[str, Any]:
    response = await http.post("/v1/exchanges", json={"tenant": "castle", **payload})
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


async def context(
    http: httpx.AsyncClient, path: str, after: str | None = None, tenant: str = "castle"
) -> dict[str, Any]:
    response = await http.get(f"/v1/tenants/{tenant}/{path}/context", params={"after": after} if after else {})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def until_folded(http: httpx.AsyncClient, path: str, wait: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + wait
    while True:
        ctx = await context(http, path)
        if ctx["summary"] or time.monotonic() > deadline:
            return ctx
        await asyncio.sleep(0.2)


async def test_past_100_exchanges_the_session_folds_keeping_at_most_30(http: httpx.AsyncClient) -> None:
    last = None
    for number in range(101):
        last = await post(http, subject="hundred", question=f"question {number}", answer=f"answer {number}")
    assert last is not None
    await context(http, "subjects/hundred", last["position"])
    ctx = await until_folded(http, "subjects/hundred")
    questions = [e["question"] for e in ctx["exchanges"]]
    assert questions == [f"question {n}" for n in range(71, 101)]  # small exchanges: the 30 newest stay
    assert 0 < len(ctx["summary"]) <= 3_000
    assert "question 0 -> answer 0" in ctx["summary"]
    assert ctx["exchanges_to_fold"] == 70


async def test_past_32000_tokens_the_session_keeps_its_newest_12000(
    http: httpx.AsyncClient, count_tokens: TokenCounter
) -> None:
    for number in range(33):  # exchanges of about 1,000 tokens: the 33rd answer passes 32,000
        await post(http, subject="tokens", question=filler(990, f"q{number}"), answer="ok")
    ctx = await until_folded(http, "subjects/tokens")
    kept = ctx["exchanges"]
    kept_tokens = sum(count_tokens(e["question"]) + count_tokens("ok") for e in kept)
    assert kept_tokens <= 12_000 < kept_tokens + 1_000  # as many of the newest as fit 12,000
    assert ctx["tokens"] == kept_tokens + count_tokens(ctx["summary"])
    assert ctx["tokens_to_fold"] == 32_000 - ctx["tokens"]
    assert len(ctx["summary"]) <= 3_000


async def test_the_rendered_context_only_grows_at_the_end_across_50_exchanges(http: httpx.AsyncClient) -> None:
    before = ""
    for number in range(50):
        accepted = await post(
            http,
            subject="cache",
            question=f"question {number}",
            answer=f"answer {number}",
            tool_calls=[{"name": "look", "arguments": {"n": number}, "result": {"seen": number}}],
            channel="askx" if number % 10 == 9 else "v2",
        )
        ctx = await context(http, "subjects/cache", accepted["position"])
        assert ctx["rendered"].startswith(before), number
        assert len(ctx["rendered"]) > len(before)
        before = ctx["rendered"]
    assert "askx: question 9 -> answer 9\n" in before
    assert ctx["exchanges"][9]["line"] == "askx: question 9 -> answer 9"


async def test_public_questions_carry_the_askers_name_and_no_tool_results(http: httpx.AsyncClient) -> None:
    await post(
        http,
        subject="ann",
        thread="public",
        asker="Ann",
        question="how many diamonds do I have?",
        tool_calls=[{"name": "inventory", "result": {"diamond": 12}}],
        answer="Twelve.",
    )
    second = await post(
        http, subject="bob", thread="public", question="and how many does Ann have?", answer="Twelve, she said."
    )
    ctx = await context(http, "public", second["position"])
    assert [e["question"] for e in ctx["exchanges"]] == [
        "Ann: how many diamonds do I have?",
        "bob: and how many does Ann have?",
    ]
    assert all(e["tool_calls"] == [] for e in ctx["exchanges"])
    assert ctx["exchanges"][0]["answer"] == "Twelve."
    # neither the asker's own session nor another tenant sees it
    assert (await context(http, "subjects/ann"))["exchanges"] == []
    other = await http.get("/v1/tenants/elsewhere/public/context")
    assert other.json()["exchanges"] == []


async def test_an_automation_thread_lives_apart_from_the_subjects_session(http: httpx.AsyncClient) -> None:
    accepted = await post(
        http,
        subject="carl",
        thread="automation",
        agent="miner",
        question="wake: mine iron",
        tool_calls=[{"name": "mine", "result": {"iron": 5}}],
        answer="mined 5 iron",
    )
    ctx = await context(http, "agents/miner", accepted["position"])
    assert ctx["exchanges"][0]["tool_calls"][0]["result"] == {"iron": 5}
    assert ctx["thread"] == "automation" and ctx["owner"] == "miner"
    assert (await context(http, "subjects/carl"))["exchanges"] == []


async def test_a_reset_starts_a_new_session(http: httpx.AsyncClient) -> None:
    await post(http, subject="dora", question="remember the old days?", answer="yes")
    reset = await http.post("/v1/tenants/castle/subjects/dora/reset", json={"reason": "/allay new"})
    assert reset.status_code == 202
    ctx = await context(http, "subjects/dora", reset.json()["position"])
    assert ctx["exchanges"] == [] and ctx["tokens"] == 0
    accepted = await post(http, subject="dora", question="hello again", answer="hi")
    ctx = await context(http, "subjects/dora", accepted["position"])
    assert [e["question"] for e in ctx["exchanges"]] == ["hello again"]


async def test_ttls_follow_the_event_time_and_a_replayed_exchange_never_revives(
    http: httpx.AsyncClient, live: Settings
) -> None:
    now = now_ms()
    fresh = await post(
        http, subject="erin", question="nearly a day ago", answer="a", occurred_at=now - 24 * HOUR_MS + 20_000
    )
    old = await post(http, subject="fred", question="two days ago", answer="b", occurred_at=now - 48 * HOUR_MS)
    public = await post(
        http,
        tenant="ttl-town",
        subject="gus",
        thread="public",
        question="hour and a half ago",
        answer="c",
        occurred_at=now - 90 * 60_000,
    )
    assert (await context(http, "subjects/fred", old["position"]))["exchanges"] == []
    assert len((await context(http, "subjects/erin", fresh["position"]))["exchanges"]) == 1
    await context(http, "public", public["position"], tenant="ttl-town")
    client = aioredis.Redis.from_url(live.redis)
    prefix = live.redis_prefix
    session_ttl = await client.pttl(f"{thread_base(prefix, ThreadKey.session('castle', 'erin'))}:h")
    public_ttl = await client.pttl(f"{thread_base(prefix, ThreadKey.public('ttl-town'))}:h")
    await client.aclose()
    assert 0 < session_ttl <= 20_000  # only what remains of its 24 hours
    assert 29 * 60_000 < public_ttl <= 30 * 60_000  # 2 h public thread, 90 min gone


async def test_bad_input_answers_422_naming_the_problem(http: httpx.AsyncClient, live: Settings) -> None:
    too_big = {"tenant": "castle", "subject": "s", "question": "x" * (live.max_message_bytes + 10)}
    response = await http.post("/v1/exchanges", json=too_big)
    assert response.status_code == 422 and "at most" in response.text
    for payload, field in [
        ({"tenant": "castle", "subject": "s"}, "question"),
        ({"tenant": "castle", "subject": "s", "question": "q", "channel": "v3"}, "channel"),
        ({"tenant": "castle", "subject": "s", "question": "q", "tool_calls": [{"result": 1}]}, "name"),
        ({"tenant": "castle", "subject": "s", "question": "q", "thread": "automation"}, "agent"),
    ]:
        response = await http.post("/v1/exchanges", json=payload)
        assert response.status_code == 422, payload
        assert field in json.dumps(response.json()["detail"])


async def dump(client: aioredis.Redis, prefix: str) -> dict[str, Any]:
    """Every thread key under a namespace, by its name without the prefix, as raw bytes."""
    found: dict[str, Any] = {}
    async for raw in client.scan_iter(match=f"{prefix}:*", count=1000):
        key = raw.decode()
        name = key[len(prefix) + 1 :]
        if name.startswith(("{session:", "{public:", "{automation:", "{lines:")):
            kind = await client.type(raw)
            if kind == b"hash":
                found[name] = await client.hgetall(raw)
            elif kind == b"list":
                found[name] = await client.lrange(raw, 0, -1)
            elif kind == b"zset":
                found[name] = await client.zrange(raw, 0, -1, withscores=True)
    return found


async def test_a_replay_into_empty_redis_gives_the_same_threads_byte_for_byte(live: Settings, stack: Settings) -> None:
    # runs last in this module: every thread above, folds included, is in the log by now
    replay = live.model_copy(
        update={
            "app_id": live.app_id + "-replay",
            "namespace": live.namespace + "r",
            "fold_agent": False,
        }
    )
    client = aioredis.Redis.from_url(live.redis)
    live_applied = await client.hgetall(f"{live.redis_prefix}:applied:threads")
    worker = await asyncio.to_thread(start_worker, replay, LOGS)
    try:
        deadline = time.monotonic() + 120
        while await client.hgetall(f"{replay.redis_prefix}:applied:threads") != live_applied:
            assert time.monotonic() < deadline, "the replay did not catch up"
            await asyncio.sleep(0.2)
        live_threads = await dump(client, live.redis_prefix)
        rebuilt = await dump(client, replay.redis_prefix)
    finally:
        worker.stop()
        await client.aclose()
    assert len(live_threads) > 20
    assert rebuilt == live_threads


class ChatCompletions(BaseHTTPRequestHandler):
    """The smallest server that speaks the OpenAI chat-completions API, for the summarizer's client."""

    requests: list[dict[str, Any]] = []
    fail = False

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if type(self).fail:
            self.send_response(500)
            self.end_headers()
            return
        user = body["messages"][-1]["content"]
        folded = user.count("\nQ: ") + user.startswith("Q: ")
        reply = {"choices": [{"message": {"role": "assistant", "content": f"SUMMARY of {folded} exchanges"}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def completions() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), ChatCompletions)
    ChatCompletions.requests = []
    ChatCompletions.fail = False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


async def test_a_fold_can_call_an_openai_compatible_endpoint(stack: Settings, completions: str) -> None:
    settings = own_settings(
        stack,
        summarizer="openai",
        summarizer_url=completions,
        summarizer_model="tiny",
        summarizer_api_key="secret-key",
        fold_exchanges=10,
        fold_keep_max=2,
    )
    with memlog(settings):
        async with api_client(settings) as http:
            for number in range(11):
                await post(http, subject="hal", question=f"q{number}", answer=f"a{number}")
            ctx = await until_folded(http, "subjects/hal")
    assert ctx["summary"] == "SUMMARY of 9 exchanges"  # 11 exchanges, at least 2 stay
    (request,) = ChatCompletions.requests
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer secret-key"
    assert request["body"]["model"] == "tiny"
    assert "Q: q0\nA: a0\n" in request["body"]["messages"][-1]["content"]


async def test_a_failing_summarizer_loses_nothing_and_the_context_read_folds_past_42000(
    stack: Settings, completions: str, count_tokens: TokenCounter
) -> None:
    ChatCompletions.fail = True
    worker_settings = own_settings(
        stack,
        summarizer="openai",
        summarizer_url=completions,
        summarizer_model="down",
        fold_retry_seconds=600,
    )
    api_settings = worker_settings.model_copy(update={"summarizer": "extractive"})
    with memlog(worker_settings, api=False), memlog(api_settings, worker=False):
        async with api_client(api_settings) as http:
            last = None
            for number in range(4):  # 4 x 11,000 tokens: past 32,000 at the 3rd, past 42,000 at the 4th
                last = await post(http, subject="ivy", question=filler(11_000, f"q{number}"), answer=f"a{number}")
            assert last is not None
            deadline = time.monotonic() + 30
            while len(ChatCompletions.requests) < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert ChatCompletions.requests, "the worker never tried to fold"
            # the read past 42,000 tokens folds first, with the API's own summarizer, then answers
            ctx = await context(http, "subjects/ivy", last["position"])
    assert ctx["summary"].startswith("- q0:") and len(ctx["summary"]) <= 3_000
    assert [e["answer"] for e in ctx["exchanges"]] == ["a2", "a3"]  # at least 2 stay, whatever their size
    assert ctx["tokens"] < 42_000


async def test_the_cli_starts_a_new_session(http: httpx.AsyncClient, live: Settings) -> None:
    from memlog.dev.processes import settings_env

    await post(http, subject="jack", question="before the reset", answer="ok")
    done = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memlog",
        "reset",
        "castle",
        "jack",
        env=settings_env(live),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await done.communicate()
    assert done.returncode == 0, output
    position = output.decode().split()[-1]
    assert (await context(http, "subjects/jack", position))["exchanges"] == []
