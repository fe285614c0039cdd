"""Evidence and completion (seed 004) on the real broker and MongoDB-protocol server: a run linked to the
exchange whose tool call it served, both ways; a call with no result read as incomplete; a tool receipt
found by search."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from pymongo import monitoring
from pymongo.monitoring import CommandFailedEvent, CommandListener, CommandStartedEvent, CommandSucceededEvent

from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from memlog.dev.processes import free_port, run_cli
from memlog.services import open_services
from schemas.events import now_ms
from tests.e2e.conftest import StartMemlog, api_client, memlog, own_settings, run_body
from tests.e2e.reads import until_ok

MINUTE_MS = 60_000


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    """One worker and an API with the default timeout (300 s)."""
    return start_memlog()


@pytest.fixture(scope="module")
def quick_settings(live: Settings) -> Iterator[Settings]:
    """A second API, on the same topics, where a call times out after 1 s."""
    with memlog(
        live.model_copy(update={"api_port": free_port(), "tool_result_timeout_seconds": 1.0}), worker=False
    ) as quick:
        yield quick


@pytest.fixture
async def quick(quick_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(quick_settings) as client:
        yield client


async def posted(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(url, json=body)
    assert response.status_code == 202, response.text[:500]
    accepted: dict[str, Any] = response.json()
    return accepted


async def context(http: httpx.AsyncClient, subject: str, after: str) -> dict[str, Any]:
    response = await until_ok(http, f"/v1/tenants/castle/subjects/{subject}/context", {"after": after})
    assert response.status_code == 200, response.text[:500]
    found: dict[str, Any] = response.json()
    return found


def a_run(run_id: str, subject: str, **link: Any) -> dict[str, Any]:
    end = now_ms()
    return run_body(
        "castle",
        subject,
        run_id,
        end_ms=end,
        steps=[
            {
                "model": "small-1",
                "prompt": "find the base",
                "output": "found",
                "input_tokens": 10,
                "output_tokens": 2,
                "started_at": end - 900,
                "duration_ms": 500,
            }
        ],
        tool_calls=[{"name": "find_base", "started_at": end - 300, "duration_ms": 40, "result": {"x": 100}}],
        **link,
    )


async def test_a_run_and_the_exchange_it_served_link_both_ways(http: httpx.AsyncClient) -> None:
    subject, exchange_id, run_id = f"steve-{uuid.uuid4().hex[:8]}", str(uuid.uuid4()), f"run-{uuid.uuid4().hex}"
    exchange = await posted(
        http,
        "/v1/exchanges",
        {
            "tenant": "castle",
            "subject": subject,
            "exchange_id": exchange_id,
            "question": "where is my base?",
            "tool_calls": [
                {"name": "look_around", "arguments": {}, "result": {"biome": "plains"}},
                {"name": "find_base", "arguments": {"player": subject}, "result": {"receipt": "obsidianwatch-4711"}},
            ],
            "answer": "At 100 64 -20.",
        },
    )
    run = await posted(http, "/v1/runs", a_run(run_id, subject, exchange_id=exchange_id, call_index=1))
    assert run["sampled"] is True

    # the run links back to its exchange, its call and its thread
    shape = (await until_ok(http, f"/v1/tenants/castle/runs/{run_id}", {"after": run["position"]})).json()
    assert shape["exchange"] == {"exchange_id": exchange_id, "call_index": 1, "thread": f"session:{subject}"}

    # the exchange's tool call carries the run
    read = await context(http, subject, exchange["position"])
    (seen,) = read["exchanges"]
    assert [(c["call_index"], c["status"], c["run_id"]) for c in seen["tool_calls"]] == [
        (0, "ok", None),
        (1, "ok", run_id),
    ]

    # the call's receipt is an archive entry that search finds, and it names the run too
    thread = f"/v1/tenants/castle/threads/session:{subject}"
    response = await until_ok(http, thread + "/search", {"q": "obsidianwatch", "after": exchange["position"]})
    assert response.status_code == 200, response.text[:500]
    (hit,) = response.json()["results"]
    assert (hit["entry_id"], hit["role"], hit["exchange_id"], hit["run_id"]) == (
        f"{exchange_id}.t1",
        "tool",
        exchange_id,
        run_id,
    )
    assert "obsidianwatch-4711" in hit["excerpt"]
    tools = {n["entry_id"]: n.get("run_id") for n in hit["neighbours"] if n["role"] == "tool"}
    assert tools == {f"{exchange_id}.t0": None}
    exported = (await http.get(thread + "/conversations/main/export")).json()["entries"]
    assert {e["entry_id"]: e["run_id"] for e in exported if e["role"] == "tool"} == {
        f"{exchange_id}.t0": None,
        f"{exchange_id}.t1": run_id,
    }
    entry = (await http.get(f"{thread}/entries/{exchange_id}.t1")).json()
    assert entry["run_id"] == run_id


class Commands(CommandListener):
    """Every MongoDB command a client of this process starts, once it is registered."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: CommandStartedEvent) -> None:  # type: ignore[override]
        self.names.append(event.command_name)

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass


async def test_a_plain_context_read_of_a_served_thread_asks_mongodb_nothing(
    live: Settings, http: httpx.AsyncClient
) -> None:
    """The runs that served a thread's calls are linked in its served mark, read with the thread: the
    read is Redis alone (seed 004's evidence included), as the API's shortcut makes it."""
    subject, exchange_id, run_id = f"tim-{uuid.uuid4().hex[:8]}", str(uuid.uuid4()), f"run-{uuid.uuid4().hex}"
    body = {"tenant": "castle", "subject": subject, "exchange_id": exchange_id, "question": "where?"}
    await posted(http, "/v1/exchanges", {**body, "tool_calls": [{"name": "find_base", "result": {"x": 1}}]})
    run = await posted(http, "/v1/runs", a_run(run_id, subject, exchange_id=exchange_id, call_index=0))
    commands = Commands()
    monitoring.register(commands)  # for the clients made after this; it only records
    async with open_services(live, producer=True) as services:
        read = await services.contexts.ready_session(
            "castle", subject, question=None, agent=None, after=run["position"], wait=30
        )
        commands.names.clear()
        for _ in range(3):
            read = await services.contexts.ready_session(
                "castle", subject, question=None, agent=None, after=None, wait=None
            )
            assert [c["run_id"] for c in json.loads(read.exchanges_json)[0]["tool_calls"]] == [run_id]
        assert commands.names == []


async def test_a_run_of_another_thread_does_not_link(http: httpx.AsyncClient) -> None:
    """Exchange ids are the backend's: the same id in another subject's session is another exchange."""
    mine, theirs, exchange_id = f"ann-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    body = {"tenant": "castle", "subject": mine, "exchange_id": exchange_id, "question": "open it"}
    exchange = await posted(http, "/v1/exchanges", {**body, "tool_calls": [{"name": "open", "result": {}}]})
    run_id = f"run-{uuid.uuid4().hex}"
    run = await posted(http, "/v1/runs", a_run(run_id, theirs, exchange_id=exchange_id, call_index=0))
    shape = (await until_ok(http, f"/v1/tenants/castle/runs/{run_id}", {"after": run["position"]})).json()
    assert shape["exchange"]["thread"] == f"session:{theirs}"
    read = await context(http, mine, exchange["position"])
    assert read["exchanges"][0]["tool_calls"][0]["run_id"] is None


async def test_a_call_with_no_result_reads_incomplete_after_the_timeout(
    http: httpx.AsyncClient, quick: httpx.AsyncClient
) -> None:
    """Streamed parts: the call is sent before its result. A minute ago, so past a 1 s timeout (the quick
    API) and within the default 300 s (the other); no wall-clock race either way."""
    subject, exchange_id = f"alex-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    at = now_ms() - MINUTE_MS
    route = {"tenant": "castle", "subject": subject, "occurred_at": at}
    base = f"/v1/exchanges/{exchange_id}"
    await posted(http, base + "/question", {**route, "question": "mine the ore and smelt it"})
    await posted(http, base + "/tool-calls", {**route, "call_index": 0, "name": "mine", "arguments": {"ore": "iron"}})
    last = await posted(http, base + "/tool-calls", {**route, "call_index": 1, "name": "count", "result": {"n": 3}})

    timed_out = await context(quick, subject, last["position"])
    assert [c["status"] for c in timed_out["exchanges"][0]["tool_calls"]] == ["incomplete", "ok"]
    assert timed_out["exchanges"][0]["tool_calls"][0]["called_at"] == at
    within = await context(http, subject, last["position"])
    assert [c["status"] for c in within["exchanges"][0]["tool_calls"]] == ["pending", "ok"]

    # a failure is an answer, not a missing result
    failed = await posted(
        http, base + "/tool-calls", {**route, "call_index": 2, "name": "smelt", "ok": False, "result": None}
    )
    statuses = [c["status"] for c in (await context(quick, subject, failed["position"]))["exchanges"][0]["tool_calls"]]
    assert statuses == ["incomplete", "ok", "error"]

    # its result, late: the call answered, and keeps the time it was made
    answered = await posted(
        http,
        base + "/tool-calls",
        {**route, "occurred_at": at + 5, "call_index": 0, "name": "mine", "result": {"ore": "glowquartz", "n": 7}},
    )
    calls = (await context(quick, subject, answered["position"]))["exchanges"][0]["tool_calls"]
    assert [(c["status"], c["called_at"]) for c in calls] == [("ok", at), ("ok", at), ("error", at)]
    assert calls[0]["result"] == {"ore": "glowquartz", "n": 7}

    # the archive keeps the call as it was sent and, apart, the receipt that answered it: search finds it
    thread = f"/v1/tenants/castle/threads/session:{subject}"
    response = await until_ok(http, thread + "/search", {"q": "glowquartz", "after": answered["position"]})
    assert response.status_code == 200, response.text[:500]
    assert [(h["entry_id"], h["role"]) for h in response.json()["results"]] == [(f"{exchange_id}.t0", "tool")]
    exported = (await http.get(thread + "/conversations/main/export")).json()["entries"]
    assert [e["entry_id"] for e in exported if e["role"] == "tool"] == [
        f"{exchange_id}.t0.c",
        f"{exchange_id}.t1",
        f"{exchange_id}.t2",
        f"{exchange_id}.t0",
    ]


async def test_a_run_naming_a_call_or_a_thread_without_its_exchange_is_refused(http: httpx.AsyncClient) -> None:
    for link, field in [({"call_index": 0}, "call_index"), ({"thread": "public"}, "thread")]:
        response = await http.post("/v1/runs", json=a_run(f"run-{uuid.uuid4().hex}", "steve", **link))
        assert response.status_code == 422, response.text[:300]
        assert field in response.text


async def test_the_link_is_rebuilt_by_a_replay(stack: Settings) -> None:
    """The link lives in the trace a RunTraced projects: a replay that switches keeps it both ways."""
    with memlog(own_settings(stack)) as settings:
        async with api_client(settings) as http:
            subject, exchange_id, run_id = "steve", str(uuid.uuid4()), f"run-{uuid.uuid4().hex}"
            body = {"tenant": "castle", "subject": subject, "exchange_id": exchange_id, "question": "where?"}
            await posted(http, "/v1/exchanges", {**body, "tool_calls": [{"name": "find_base", "result": {"x": 1}}]})
            run = await posted(http, "/v1/runs", a_run(run_id, subject, exchange_id=exchange_id, call_index=0))
            await until_ok(http, f"/v1/tenants/castle/runs/{run_id}", {"after": run["position"]})

            replayed = run_cli(settings, "replay", "--projection", "traces")
            assert replayed.returncode == 0, replayed.stdout + replayed.stderr
            assert "rebuilt: sessions, archives, facts, traces" in replayed.stdout, replayed.stdout
            rebuilt = replayed.stdout.split("replayed ", 1)[1].split(" into ", 1)[1].split(" ", 1)[0]
            assert rebuilt != settings.namespace
            mongo = mongo_client(settings.mongo)
            try:
                scoped = settings.model_copy(update={"namespace": rebuilt})
                trace = await mongo[scoped.mongo_db_name]["traces"].find_one({"run_id": run_id})
            finally:
                await mongo.close()
            assert trace is not None
            assert (trace["exchange_id"], trace["call_index"], trace["exchange_thread"]) == (
                exchange_id,
                0,
                "session:steve",
            )

            shape = (await http.get(f"/v1/tenants/castle/runs/{run_id}")).json()
            assert shape["exchange"] == {"exchange_id": exchange_id, "call_index": 0, "thread": "session:steve"}
            read = (await http.get(f"/v1/tenants/castle/subjects/{subject}/context")).json()
            assert [c["run_id"] for c in read["exchanges"][0]["tool_calls"]] == [run_id]
