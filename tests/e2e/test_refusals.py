"""What the API refuses, and when: a credential before the body is read, a body past the limit before
it is parsed, JSON the stores cannot keep, reused idempotency keys and taken conversation names; and
what it never answers with: a 500."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import free_port, settings_env
from schemas.limits import INT32_MAX, INT64_MAX, MAX_JSON_DEPTH
from tests.conftest import unique_settings
from tests.e2e.conftest import api_client, memlog, own_settings

TENANT = "keep"
BACKEND = {"Authorization": "Bearer tok-keep"}
OPERATOR = {"Authorization": "Bearer tok-op"}
MAX_BODY = 262_144  # small, so the test sends little to pass it
CAFE = "caf\u00e9-token"  # a configured non-ASCII credential, sent as its UTF-8 bytes


@pytest.fixture(scope="module")
def live(stack: Settings) -> Iterator[Settings]:
    settings = own_settings(
        stack,
        backend_tokens={"tok-keep": TENANT, "tok-other": "other", CAFE: TENANT},
        operator_tokens=["tok-op"],
        max_body_bytes=MAX_BODY,
        fork_entries=5,
    )
    with memlog(settings):
        yield settings


@pytest.fixture
def api_headers() -> dict[str, str]:
    """The shared `http` client (tests/e2e/conftest.py) sends the backend's credential on every request."""
    return BACKEND


def exchange(subject: str, **extra: Any) -> dict[str, Any]:
    return {"tenant": TENANT, "subject": subject, "question": "what is in the chest?", "answer": "12 diamonds", **extra}


def raw_request(port: int, head: str, body: bytes, timeout: float = 10.0) -> bytes:
    """Send a request's head and part of its body, then read whatever the server answers within
    `timeout`: a server that waits for the rest of the body answers nothing.

    A server that answers before reading everything sent closes with unread bytes, and the kernel may
    then reset the connection before its answer is read; such an attempt is made again (at most 3)."""
    for attempt in range(3):
        try:
            return _one_raw_request(port, head, body, timeout)
        except (ConnectionResetError, BrokenPipeError):
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _one_raw_request(port: int, head: str, body: bytes, timeout: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n" + body)
        answer = b""
        deadline = time.monotonic() + timeout
        while not _complete(answer) and time.monotonic() < deadline:
            try:
                chunk = sock.recv(65_536)
            except TimeoutError:
                break
            if not chunk:
                break
            answer += chunk
        return answer


def _complete(answer: bytes) -> bool:
    """The head and as much body as its Content-Length announces have arrived (they may come apart)."""
    if b"\r\n\r\n" not in answer:
        return False
    head, body = answer.split(b"\r\n\r\n", 1)
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value.strip())
    return True


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def head(path: str, length: int | None, *headers: str) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *headers]
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    return "\r\n".join(lines) + "\r\n"


# --- credentials and size: before the body is read ------------------------------------------------


def test_a_request_without_a_credential_is_refused_before_its_body_is_read(live: Settings) -> None:
    # the limit announced, 64 KiB sent: a server that read the body before the credential would wait
    answer = raw_request(live.api_port, head("/v1/exchanges", MAX_BODY), b"{" + b" " * 65_535)
    assert status_of(answer) == 401


@pytest.mark.parametrize("credential", [(), ("Authorization: Bearer tok-keep",)])
def test_a_body_announced_past_the_limit_is_refused_before_it_is_read(
    live: Settings, credential: tuple[str, ...]
) -> None:
    # only the head: a server that waited for the announced body would never answer
    answer = raw_request(live.api_port, head("/v1/exchanges", 100_000_000, *credential), b"")
    assert status_of(answer) == 413 and b"MEMLOG_MAX_BODY_BYTES" in answer


def test_a_chunked_body_is_refused_once_it_passes_the_limit(live: Settings) -> None:
    chunk = b" " * 65_536
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(MAX_BODY // len(chunk) + 2))
    answer = raw_request(live.api_port, head("/v1/exchanges", None, "Authorization: Bearer tok-keep"), chunked)
    assert status_of(answer) == 413


async def test_a_non_ascii_bearer_token_is_refused_or_matched_never_a_500(live: Settings) -> None:
    url = f"/v1/tenants/{TENANT}/subjects/s/facts"
    async with api_client(live) as client:
        unknown = await client.get(url, headers={"Authorization": "Bearer h\u00e9llo-\u00fc".encode()})
        assert unknown.status_code == 401, unknown.text
        known = await client.get(url, headers={"Authorization": f"Bearer {CAFE}".encode()})
        assert known.status_code == 200, known.text


async def test_metrics_need_an_operator_credential(http: httpx.AsyncClient) -> None:
    assert (await http.get("/metrics", headers={"Authorization": ""})).status_code == 401
    assert (await http.get("/metrics")).status_code == 403  # a backend credential
    scraped = await http.get("/metrics", headers=OPERATOR)
    assert scraped.status_code == 200 and "memlog_" in scraped.text


async def test_the_trace_page_never_takes_the_token_from_its_address(http: httpx.AsyncClient) -> None:
    refused = await http.get("/admin/traces", params={"tenant": TENANT, "token": "tok-op"}, headers={})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"][-1] == "token"
    page = await http.get("/admin/traces", params={"tenant": TENANT}, headers={})
    assert page.status_code == 200
    assert '<form id="filters" method="post">' in page.text and 'key !== "token"' in page.text


# --- what the stores cannot keep ------------------------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


async def test_json_nested_past_the_limit_is_refused_and_the_context_stays_readable(http: httpx.AsyncClient) -> None:
    deep = await http.post("/v1/exchanges", json=exchange("deep", tool_calls=[{"name": "t", "arguments": nested(300)}]))
    assert deep.status_code == 422, deep.text
    problem = deep.json()["detail"][0]
    assert problem["loc"][:4] == ["body", "tool_calls", 0, "arguments"] and "nested deeper" in problem["msg"]
    # the deepest body accepted: the body, tool_calls, the call, then the arguments' own levels
    deepest = nested(MAX_JSON_DEPTH - 3)
    kept = await http.post("/v1/exchanges", json=exchange("deep", tool_calls=[{"name": "t", "arguments": deepest}]))
    assert kept.status_code == 202, kept.text
    context = await http.get(f"/v1/tenants/{TENANT}/subjects/deep/context", params={"after": kept.json()["position"]})
    assert context.status_code == 200, context.text
    assert context.json()["exchanges"][0]["tool_calls"][0]["arguments"] == deepest


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/v1/exchanges", exchange("big", occurred_at=INT64_MAX + 1), ["body", "occurred_at"]),
        (
            "/v1/exchanges",
            exchange("big", tool_calls=[{"name": "t", "arguments": {"n": [2**70]}}]),
            ["body", "tool_calls", 0, "arguments", "n", 0],
        ),
        (
            "/v1/exchanges/x-big/tool-calls",
            {"tenant": TENANT, "subject": "big", "call_index": INT64_MAX + 1, "name": "t"},
            ["body", "call_index"],
        ),
        (
            "/v1/exchanges/x-big/tool-calls",
            {"tenant": TENANT, "subject": "big", "call_index": INT32_MAX + 1, "name": "t"},  # an Avro int
            ["body", "call_index"],
        ),
        (
            "/v1/runs",
            {"tenant": TENANT, "agent": "a", "status": "ok", "started_at": 1, "ended_at": INT64_MAX + 1},
            ["body", "ended_at"],
        ),
        (
            "/v1/runs",
            {
                "tenant": TENANT,
                "agent": "a",
                "status": "ok",
                "started_at": 1,
                "ended_at": 2,
                "steps": [
                    {
                        "seq": INT32_MAX + 1,
                        "model": "m",
                        "prompt": "p",
                        "output": "o",
                        "input_tokens": 1,
                        "output_tokens": 1,
                        "started_at": 1,
                        "duration_ms": 1,
                    }
                ],
            },
            ["body", "steps", 0, "seq"],
        ),
        (
            "/v1/runs",
            {
                "tenant": TENANT,
                "agent": "a",
                "status": "ok",
                "started_at": 1,
                "ended_at": 2,
                "steps": [
                    {
                        "model": "m",
                        "prompt": "p",
                        "output": "o",
                        "input_tokens": 2**64,
                        "output_tokens": 1,
                        "started_at": 1,
                        "duration_ms": 1,
                    }
                ],
            },
            ["body", "steps", 0, "input_tokens"],
        ),
        (
            f"/v1/tenants/{TENANT}/subjects/big/agents/a/tools/recall",
            {"arguments": {"query": "q"}, "exchange_id": "x-big", "call_index": 2**63},
            ["body", "call_index"],
        ),
    ],
)
async def test_integers_outside_what_the_stores_hold_are_refused_naming_the_field(
    http: httpx.AsyncClient, path: str, body: dict[str, Any], loc: list[Any]
) -> None:
    refused = await http.post(path, json=body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == loc


@pytest.mark.parametrize("path", [f"/v1/tenants/{TENANT}/runs", f"/v1/tenants/{TENANT}/threads/session:big/search"])
async def test_query_integers_past_int64_are_refused(http: httpx.AsyncClient, path: str) -> None:
    refused = await http.get(path, params={"q": "x", "since": str(INT64_MAX + 1)}, headers=OPERATOR)
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == ["query", "since"]


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
async def test_nan_and_infinity_literals_are_refused(http: httpx.AsyncClient, literal: bytes) -> None:
    body = b'{"tenant":"keep","agent":"a","status":"ok","started_at":%s,"ended_at":2}' % literal
    refused = await http.post("/v1/runs", content=body, headers={"content-type": "application/json"})
    assert refused.status_code == 422, refused.text
    assert literal.decode().lstrip("-") in refused.json()["detail"][0]["msg"]


async def test_a_refusal_quoting_a_lone_surrogate_or_bytes_still_encodes(http: httpx.AsyncClient) -> None:
    body = b'{"tenant":"keep","subject":"s","question":"q","thread":"\\ud800"}'
    refused = await http.post("/v1/exchanges", content=body, headers={"content-type": "application/json"})
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == ["body", "thread"]
    not_json = await http.post("/v1/exchanges", content=b"\xff\xfe not json", headers={"content-type": "text/plain"})
    assert not_json.status_code == 422, not_json.text


async def test_a_fact_with_a_lone_surrogate_is_refused_by_hand_and_by_tool(http: httpx.AsyncClient) -> None:
    json_headers = {"content-type": "application/json"}
    by_hand = await http.post(
        f"/v1/tenants/{TENANT}/subjects/sur/facts", content=b'{"text":"lone \\ud800 here"}', headers=json_headers
    )
    assert by_hand.status_code == 422 and by_hand.json()["detail"][0]["loc"] == ["body", "text"]
    by_tool = await http.post(
        f"/v1/tenants/{TENANT}/subjects/sur/agents/a/tools/remember",
        content=b'{"arguments":{"text":"lone \\udc00"}}',
        headers=json_headers,
    )
    assert by_tool.status_code == 422 and by_tool.json()["detail"][0]["loc"] == ["body", "arguments", "text"]
    # an exchange keeps it the documented way: U+FFFD in the structured copy, the escape in `original`
    kept = await http.post(
        "/v1/exchanges",
        content=b'{"tenant":"keep","subject":"sur","question":"lone \\ud800","answer":"a","model":"m\\udfff"}',
        headers=json_headers,
    )
    assert kept.status_code == 202, kept.text
    context = await http.get(f"/v1/tenants/{TENANT}/subjects/sur/context", params={"after": kept.json()["position"]})
    assert context.json()["exchanges"][0]["question"] == "lone \ufffd"


# --- what a reader sees ---------------------------------------------------------------------------


async def test_a_context_read_naming_no_agent_sees_shared_facts_only(http: httpx.AsyncClient) -> None:
    facts = f"/v1/tenants/{TENANT}/subjects/ctx/facts"
    shared = await http.post(facts, json={"text": "the guild meets on fridays", "scope": "shared"})
    own = await http.post(facts, json={"text": "owes the smith ten iron", "scope": "agent", "agent": "smith"})
    after = f"{shared.json()['position']},{own.json()['position']}"
    context = f"/v1/tenants/{TENANT}/subjects/ctx/context"
    anyone = await http.get(context, params={"after": after, "question": "what does ann owe the smith"})
    # the one fact bearing on it is the smith's own, which a read naming no agent never gets: only the shared
    # one, given as not matched (recall always hands over the best facts the reader may see)
    assert [(f["text"], f["bears"]) for f in anyone.json()["facts"]] == [("the guild meets on fridays", False)]
    filled = await http.get(context, params={"question": "what does ann owe the smith", "fill": "recent"})
    assert [f["text"] for f in filled.json()["facts"]] == ["the guild meets on fridays"]
    smith = await http.get(context, params={"after": after, "agent": "smith", "fill": "recent"})
    assert sorted(f["text"] for f in smith.json()["facts"]) == ["owes the smith ten iron", "the guild meets on fridays"]


# --- conflicts ------------------------------------------------------------------------------------


async def test_an_idempotency_key_reused_with_another_body_answers_409(http: httpx.AsyncClient) -> None:
    first = await http.post("/v1/exchanges", json=exchange("idem", idempotency_key="k-1"))
    assert first.status_code == 202, first.text
    spaced = json.dumps(exchange("idem", idempotency_key="k-1"), indent=2)
    again = await http.post("/v1/exchanges", content=spaced, headers={"content-type": "application/json"})
    assert again.status_code == 202 and again.json() == {**first.json(), "idempotent": True}
    other = await http.post("/v1/exchanges", json=exchange("idem", idempotency_key="k-1", answer="no diamonds"))
    assert other.status_code == 409, other.text
    assert other.json()["detail"][0]["loc"] == ["body", "idempotency_key"]
    context = await http.get(f"/v1/tenants/{TENANT}/subjects/idem/context", params={"after": first.json()["position"]})
    assert [e["answer"] for e in context.json()["exchanges"]] == ["12 diamonds"]


async def test_of_two_forks_to_one_new_target_exactly_one_is_accepted(http: httpx.AsyncClient) -> None:
    thread = f"/v1/tenants/{TENANT}/threads/session:forker"
    last = (await http.post("/v1/exchanges", json=exchange("forker"))).json()
    await http.get(f"{thread}/conversations", params={"after": last["position"]})
    for round_ in range(3):
        target = f"side-{round_}"
        answers = await asyncio.gather(
            *(http.post(f"{thread}/conversations/main/fork", json={"target": target}) for _ in range(4))
        )
        assert sorted(a.status_code for a in answers) == [202, 409, 409, 409], [a.text for a in answers]
        loser = next(a for a in answers if a.status_code == 409)
        assert loser.json()["detail"][0]["loc"] == ["body", "target"]
    # once the fork is applied and its target purged, the name is free again
    accepted = await http.post(f"{thread}/conversations/main/fork", json={"target": "again"})
    assert accepted.status_code == 202
    purged = await http.post(f"{thread}/conversations/again/purge", json={}, headers=OPERATOR)
    await http.get(f"{thread}/conversations", params={"after": purged.json()["position"]})
    assert (await http.post(f"{thread}/conversations/main/fork", json={"target": "again"})).status_code == 202


# --- secure by default ----------------------------------------------------------------------------


def test_the_api_refuses_a_public_address_without_credentials(stack: Settings) -> None:
    settings = unique_settings(stack, api_host="0.0.0.0", api_port=free_port())
    started = subprocess.run(
        [sys.executable, "-m", "memlog", "api"],
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode != 0
    assert "MEMLOG_API_ALLOW_OPEN" in started.stdout + started.stderr


async def test_a_refusal_names_where_the_field_was_sent_and_its_type(http: httpx.AsyncClient) -> None:
    by_query = await http.get(f"/v1/tenants/{TENANT}/subjects/s/context", params={"after": "no-token"})
    assert by_query.status_code == 422, by_query.text
    assert by_query.json()["detail"] == [
        {
            "loc": ["query", "after"],
            "msg": "'no-token' is not a position token like 'threads.3.1200'",
            "type": "value_error",
        }
    ]
    routed = await http.get(f"/v1/tenants/{TENANT}/subjects/s/facts", params={"after": ""})  # through FastAPI
    assert routed.status_code == 422 and routed.json()["detail"][0]["loc"] == ["query", "after"], routed.text
    by_path = await http.post(f"/v1/tenants/{TENANT}/subjects/bad\u009bname/reset")
    assert by_path.status_code == 422, by_path.text
    assert by_path.json()["detail"][0]["loc"] == ["path", "subject"] and by_path.json()["detail"][0]["type"]
    by_body = await http.post("/v1/exchanges", json=exchange("s", question=""))
    assert by_body.json()["detail"][0]["loc"] == ["body", "question"], by_body.text
    unknown = await http.get(f"/v1/tenants/{TENANT}/subjects/s/context", headers={"Authorization": "Bearer nope"})
    assert unknown.status_code == 401 and unknown.json()["detail"][0]["type"] == "unauthorized"


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/v1/exchanges", exchange("bools", occurred_at=False), ["body", "occurred_at"]),
        (
            "/v1/exchanges/x/answer",
            {"tenant": TENANT, "subject": "bools", "answer": "a", "occurred_at": True},
            ["body", "occurred_at"],
        ),
        (
            "/v1/exchanges",
            exchange("bools", tool_calls=[{"name": "dig", "ok": 0}]),
            ["body", "tool_calls", 0, "ok"],
        ),
        (f"/v1/tenants/{TENANT}/retention", {"confirm": 0}, ["body", "confirm"]),
        (f"/v1/tenants/{TENANT}/retention", {"confirm": "yes"}, ["body", "confirm"]),
    ],
)
async def test_booleans_and_integers_are_not_taken_for_each_other(
    http: httpx.AsyncClient, path: str, body: dict[str, Any], loc: list[Any]
) -> None:
    refused = await http.post(path, json=body, headers=OPERATOR)
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == loc, refused.text
    kept = await http.post(
        "/v1/exchanges", json=exchange("bools", occurred_at=1, tool_calls=[{"name": "dig", "ok": False}])
    )
    assert kept.status_code == 202, kept.text


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (f"/v1/tenants/{TENANT}/ledger?subject=bad%C2%9Bname", "subject"),
        (f"/v1/tenants/{TENANT}/runs?agent=bad%C2%9Bname", "agent"),
        (f"/v1/tenants/{TENANT}/subjects/s/facts?agent=bad%C2%9Bname", "agent"),
    ],
)
async def test_a_filter_by_a_name_no_one_can_have_is_refused(http: httpx.AsyncClient, path: str, name: str) -> None:
    refused = await http.get(path, headers=OPERATOR)
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == ["query", name], refused.text


async def test_an_empty_exchange_id_or_trace_tool_name_is_refused_not_taken_for_absent(
    http: httpx.AsyncClient,
) -> None:
    # an empty id taken as "none given" got a new id at every retry: the exchange was kept as many times
    exchange = {"tenant": TENANT, "subject": "empty-id", "question": "q", "answer": "a", "exchange_id": ""}
    refused = await http.post("/v1/exchanges", json=exchange)
    assert refused.status_code == 422, refused.text
    assert "exchange_id" in json.dumps(refused.json()["detail"]), refused.text
    call = {"name": "", "started_at": 1, "duration_ms": 1}
    run = {"tenant": TENANT, "agent": "a", "status": "ok", "started_at": 1, "ended_at": 2, "tool_calls": [call]}
    refused = await http.post("/v1/runs", json=run)
    assert refused.status_code == 422, refused.text
    assert "tool_calls[0].name" in json.dumps(refused.json()["detail"]), refused.text
    named = await http.post("/v1/runs", json={**run, "tool_calls": [{**call, "name": "lookup"}]})
    assert named.status_code == 202, named.text
