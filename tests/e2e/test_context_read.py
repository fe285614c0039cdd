"""The context read served from the ready context (issue 16), through memlog's own worker and API
processes on the real broker and Redis, single-node and a 3-master Redis Cluster: the same bytes the
model-validated read gives for the same state (tool calls answered, failed and pending, runs that served
them, parts arriving out of order, a fold with its loss notice, the public thread, facts, a thread stored
before the ready context existed), and ETag / If-None-Match."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from memlog.adapters.connections import redis_client
from memlog.adapters.redis_store import thread_base
from memlog.api.models import Context
from memlog.config.settings import Settings
from memlog.services import Services, open_services
from projections.session import ThreadKey
from schemas.events import now_ms
from tests.e2e.conftest import memlog, own_settings, post_exchange, run_body
from tests.e2e.reads import until_ok

TENANT = "keep"

# redis-py's cluster client closes its node connections without waiting for their sockets, which
# Python reports, after the test, as an unclosed stream; nothing leaks while the client is in use.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(scope="module", params=["redis", "redis-cluster"])
def live(stack: Settings, request: pytest.FixtureRequest) -> Iterator[Settings]:
    settings = own_settings(stack, fold_exchanges=6, fold_keep_max=3)
    if request.param == "redis-cluster":
        cluster: str = request.getfixturevalue("redis_cluster")
        settings = settings.model_copy(update={"redis_url": cluster, "redis_cluster": True})
    with memlog(settings):
        yield settings


@pytest.fixture
async def services(live: Settings) -> AsyncIterator[Services]:
    async with open_services(live, producer=True) as opened:
        yield opened


async def post(http: httpx.AsyncClient, path: str = "/v1/exchanges", **payload: Any) -> str:
    position: str = (await post_exchange(http, {"tenant": TENANT, **payload}, path))["position"]
    return position


async def read(http: httpx.AsyncClient, path: str, **params: Any) -> httpx.Response:
    response = await http.get(f"/v1/tenants/{TENANT}/{path}/context", params=params)
    assert response.status_code == 200, response.text
    return response


async def old_path(services: Services, path: str, question: str | None = None, agent: str | None = None) -> bytes:
    """The same read as before issue 16: the session decoded, rendered, validated and serialised by the model."""
    kind, _, owner = path.partition("/")
    if kind == "subjects":
        thread = await services.contexts.session(TENANT, owner, question=question, agent=agent, after=None, wait=None)
    else:
        thread = await services.contexts.public(TENANT, after=None, wait=None)
    return Context.of(thread).model_dump_json().encode()


async def test_a_session_with_tool_calls_parts_out_of_order_and_a_fold_reads_as_before(
    http: httpx.AsyncClient, services: Services
) -> None:
    path = "subjects/ann"
    await post(
        http,
        subject="ann",
        question='où est "le coffre"?\nprès du puits',
        tool_calls=[{"name": "find", "arguments": {"chest": 1, "at": [1.5, -2e20, None]}, "result": {"é": "✓"}}],
        answer="là",
    )
    # an exchange left waiting while another lands, then completed in the middle of the thread
    await post(http, "/v1/exchanges/slow-1/question", subject="ann", question="slow one?")
    await post(http, subject="ann", question="quick one?", answer="quick")
    await post(http, "/v1/exchanges/slow-1/tool-calls", subject="ann", call_index=0, name="dig", result=[1, 2])
    last = await post(http, "/v1/exchanges/slow-1/answer", subject="ann", answer="done at last")
    first = await read(http, path, after=last)
    assert first.content == await old_path(services, path)
    assert first.json()["exchanges"][1]["answer"] == "done at last"
    # past 6 exchanges the worker folds the session; the ready context is rewritten with it
    for number in range(5):
        last = await post(http, subject="ann", question=f"number {number}?", answer=f"{number}", tool_calls=[])
    deadline = time.monotonic() + 60
    while not (folded := await read(http, path, after=last)).json()["summary"] and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert folded.json()["summary"], "the session did not fold"
    notice = folded.json()["summary_notice"]
    assert notice is not None and notice["folded_exchanges"] >= 1
    assert folded.json()["rendered"].count("[Lossy ") == 1
    assert folded.content == await old_path(services, path)
    last = await post(http, subject="ann", question="after the fold?", answer="yes")
    assert (await read(http, path, after=last)).content == await old_path(services, path)


async def test_the_public_thread_and_a_read_with_facts_read_as_before(
    http: httpx.AsyncClient, services: Services
) -> None:
    await post(http, subject="bob", thread="public", asker="Bob", question="anyone seen the dragon?", answer="no")
    last = await post(
        http,
        subject="cy",
        thread="public",
        asker="Cy",
        question="where?",
        tool_calls=[{"name": "look", "result": {"secret": 1}}],
        answer="north",
    )
    public = await read(http, "public", after=last)
    assert public.content == await old_path(services, "public")
    assert "secret" not in public.text  # no tool results on the public thread
    response = await http.post(f"/v1/tenants/{TENANT}/subjects/bob/facts", json={"text": "Bob's base is by the lake"})
    assert response.status_code == 202, response.text
    path = "subjects/bob"
    await read(http, path, after=await post(http, subject="bob", question="hello?", answer="hi"))
    with_facts = await read(http, path, after=response.json()["position"], question="where is my base?")
    assert with_facts.json()["facts"], "the fact bears on the question"
    assert with_facts.content == await old_path(services, path, question="where is my base?")
    without = await read(http, path)
    assert without.content == await old_path(services, path)
    assert without.headers["etag"] != with_facts.headers["etag"]


async def test_a_session_stored_before_the_ready_context_reads_the_same_and_is_made_ready(
    http: httpx.AsyncClient, services: Services, live: Settings
) -> None:
    last = await post(http, subject="dee", question="old layout?", tool_calls=[{"name": "t", "result": 1}], answer="y")
    path = "subjects/dee"
    before = await read(http, path, after=last)
    base = thread_base(live.redis_prefix, ThreadKey.session(TENANT, "dee"))
    redis = redis_client(live)
    try:
        assert await redis.delete(f"{base}:r", f"{base}:t", f"{base}:v") == 3
        again = await read(http, path)
        assert again.content == before.content == await old_path(services, path)
        assert again.headers["etag"] == before.headers["etag"]
        assert await redis.exists(f"{base}:r", f"{base}:t", f"{base}:v") == 3
    finally:
        await redis.aclose()


async def test_an_unchanged_context_answers_304_and_a_new_exchange_a_new_etag(http: httpx.AsyncClient) -> None:
    last = await post(http, subject="eve", question="first?", answer="one")
    path = "subjects/eve"
    first = await read(http, path, after=last)
    tag = first.headers["etag"]
    assert (await read(http, path)).headers["etag"] == tag
    url = f"/v1/tenants/{TENANT}/{path}/context"
    cached = await http.get(url, headers={"If-None-Match": tag})
    assert (cached.status_code, cached.content, cached.headers["etag"]) == (304, b"", tag)
    assert (await http.get(url, headers={"If-None-Match": f'"other", W/{tag}'})).status_code == 304
    for star in ("*", '*, "other"'):  # issue 41: `*` is no match, or a client sending it never sees a change
        starred = await http.get(url, headers={"If-None-Match": star})
        assert (starred.status_code, starred.headers["etag"]) == (200, tag)
    # a question adds the facts given for it (a plain read recalls none), so another context and another tag
    saved = await http.post(f"/v1/tenants/{TENANT}/subjects/eve/facts", json={"text": "Eve keeps bees"})
    assert saved.status_code == 202, saved.text
    fact = saved.json()["position"]
    assert (await http.get(url, params={"after": fact}, headers={"If-None-Match": tag})).status_code == 304
    asked = await http.get(url, params={"question": "first?", "after": fact}, headers={"If-None-Match": tag})
    assert asked.status_code == 200 and asked.headers["etag"] != tag
    again = await http.get(
        url, params={"question": "first?", "after": fact}, headers={"If-None-Match": asked.headers["etag"]}
    )
    assert again.status_code == 304
    last = await post(http, subject="eve", question="second?", answer="two")
    changed = await http.get(url, params={"after": last}, headers={"If-None-Match": tag})
    assert changed.status_code == 200 and changed.headers["etag"] != tag
    assert [e["question"] for e in changed.json()["exchanges"]] == ["first?", "second?"]
    public = await http.get(f"/v1/tenants/{TENANT}/public/context", headers={"If-None-Match": tag})
    assert public.status_code == 200 and public.headers["etag"] != tag


async def test_evidence_is_the_reads_own_runs_traced_and_calls_unanswered_read_as_before(
    http: httpx.AsyncClient, services: Services
) -> None:
    """A call answered, one failed, one with no result (pending: its status is the clock's), and runs
    that served a call and the exchange: none of it is in the stored ready context, all of it in the read."""
    subject, exchange_id = f"fay-{uuid.uuid4().hex[:6]}", str(uuid.uuid4())
    path = f"subjects/{subject}"
    route = {"subject": subject, "occurred_at": now_ms() - 60_000}  # pending: within the default 300 s
    base = f"/v1/exchanges/{exchange_id}"
    await post(http, base + "/question", **route, question="mine, count, smelt?")
    await post(http, base + "/tool-calls", **route, call_index=0, name="mine", arguments={"ore": "iron"})
    await post(http, base + "/tool-calls", **route, call_index=1, name="count", result={"n": 3})
    last = await post(http, base + "/tool-calls", **route, call_index=2, name="smelt", ok=False, result=None)
    plain = await read(http, path, after=last)
    calls = plain.json()["exchanges"][0]["tool_calls"]
    assert [(c["status"], c["run_id"]) for c in calls] == [("pending", None), ("ok", None), ("error", None)]
    assert plain.content == await old_path(services, path)
    tag = plain.headers["etag"]

    # runs traced later change the read, not the thread: the read joins them, and the tag follows
    served_call, served_exchange = f"run-{uuid.uuid4().hex}", f"run-{uuid.uuid4().hex}"
    for run_id, link in [(served_call, {"call_index": 1}), (served_exchange, {})]:
        response = await http.post("/v1/runs", json=run_body(TENANT, subject, run_id, exchange_id=exchange_id, **link))
        assert response.status_code == 202, response.text
        traced = await until_ok(http, f"/v1/tenants/{TENANT}/runs/{run_id}", {"after": response.json()["position"]})
        assert traced.status_code == 200, traced.text
    linked = await read(http, path)
    seen = linked.json()["exchanges"][0]
    assert [c["run_id"] for c in seen["tool_calls"]] == [None, served_call, None]
    assert seen["run_id"] == served_exchange
    assert linked.content == await old_path(services, path)
    assert linked.headers["etag"] != tag

    # an answered exchange with no run: the stored bytes as they are
    last = await post(http, subject=subject, question="plain?", answer="yes", tool_calls=[{"name": "t", "result": 1}])
    assert (await read(http, path, after=last)).content == await old_path(services, path)
    response = await http.get(f"/v1/tenants/{TENANT}/{path}/context", headers={"If-None-Match": linked.headers["etag"]})
    assert response.status_code == 200
