"""Every lifetime of DESIGN.md's table runs out by itself (issue 36): with the lifetimes set in seconds, a
worker and an API of this module's own record one of each kind of personal data, and no command is typed
after that: the session, the public and automation threads, the facts, the trace, the task, subagent
and other main-kind conversations, the export bundle, the idempotency claim and the ledger entries go;
the current conversation `main` stays (seed 004 protects it), but what its fold and its reset took out
of its transcript (its compacted and reset generations) goes.

Then disk: values planted for a subject who is erased are gone from Redis's files within
MEMLOG_COMPACT_AFTER_SECONDS, the worker having compacted by itself (ledgered, and in its /metrics).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from memlog.dev.processes import free_port
from schemas.events import now_ms
from tests.e2e.conftest import StartMemlog

TENANT = "brief-lives"
SECONDS = 5
DAYS = SECONDS / 86_400  # the *_DAYS settings take fractions
# MongoDB's (and SecantusDB's) TTL monitor wakes every 60 s: a TTL index deletes within about that
DEADLINE_SECONDS = 240
GENERATION_SECONDS = 20  # long enough to see a generation made before it goes
FOLD_EXCHANGES = 3  # a session past this many exchanges folds all but the newest


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog(
        worker_metrics_port=free_port(),
        privacy_database=f"memlogtest_privacy_{uuid.uuid4().hex[:8]}",  # its ledger's TTL is this module's own
        chat_ttl_seconds=SECONDS,
        public_ttl_seconds=SECONDS,
        automation_ttl_seconds=SECONDS,
        facts_keep_days=DAYS,
        trace_days=DAYS,
        retention_enabled=True,
        retention_check_seconds=1.0,
        retention_main_days=DAYS,
        retention_task_days=DAYS,
        retention_subagent_days=DAYS,
        retention_generation_seconds=GENERATION_SECONDS,
        fold_exchanges=FOLD_EXCHANGES,
        fold_keep_tokens=0,
        fold_keep_min=0,
        fold_keep_max=1,
        export_keep_seconds=SECONDS,
        idempotency_ttl_seconds=SECONDS,
        ingest_retention_seconds=SECONDS,
        ledger_days=6 * DAYS,
        deadletter_retention_seconds=SECONDS,
        compact_after_seconds=6.0,
    )


async def accepted(response: Awaitable[httpx.Response]) -> Any:
    answer = await response
    assert answer.status_code in (200, 202), answer.text
    return answer.json()


async def eventually(what: str, done: Callable[[], Awaitable[bool]]) -> None:
    """Wait for `done` with no command typed: the lifetimes run out by themselves."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not await done():
        assert time.monotonic() < deadline, f"{what} did not expire by itself"
        await asyncio.sleep(1)


def thread(subject: str) -> str:
    return f"/v1/tenants/{TENANT}/threads/session:{subject}"


async def record_one_of_each(http: httpx.AsyncClient, s: str) -> dict[str, str]:
    """A session exchange, a public and an automation question, finished conversations of each kind, a
    fact, a traced run and an export; returns what the checks need."""
    post = http.post
    body = {"tenant": TENANT, "subject": s, "question": "where?", "answer": "here", "idempotency_key": f"{s}-k"}
    first = await accepted(post("/v1/exchanges", json=body))
    await accepted(post("/v1/exchanges", json={"tenant": TENANT, "subject": s, "thread": "public", "question": "hi"}))
    automation = {"tenant": TENANT, "subject": s, "thread": "automation", "agent": "clock", "question": "tick"}
    await accepted(post("/v1/exchanges", json=automation | {"answer": "tock"}))
    last = ""
    for conversation, kind in (("quest", "task"), ("scout", "subagent"), ("old", "main")):
        said = {"tenant": TENANT, "subject": s, "question": "q", "answer": "a", "conversation": conversation}
        at = (await accepted(post("/v1/exchanges", json=said)))["position"]
        path = f"{thread(s)}/conversations/{conversation}/archive"
        marked = post(path, params={"after": at}, json={"archived": True, "kind": kind})
        last = (await accepted(marked))["position"]
    await accepted(post(f"/v1/tenants/{TENANT}/subjects/{s}/facts", json={"text": "likes short lives"}))
    now = now_ms()
    run = {
        "tenant": TENANT,
        "subject": s,
        "agent": "clock",
        "run_id": f"run-{s}",
        "status": "ok",
        "started_at": now - 10,
        "ended_at": now,
    }
    position = (await accepted(post("/v1/runs", json=run)))["position"]
    await http.get(f"/v1/tenants/{TENANT}/subjects/{s}/context", params={"after": position, "wait": 30})
    exported = await post(f"/v1/tenants/{TENANT}/subjects/{s}/export")
    assert exported.status_code == 200, exported.text
    return {"position": first["position"], "last": last, "run": f"run-{s}"}


async def test_each_lifetime_runs_out_by_itself(http: httpx.AsyncClient) -> None:
    s = "brief-ann"
    made = await record_one_of_each(http, s)
    ledger = await accepted(http.get(f"/v1/tenants/{TENANT}/ledger"))
    export_ids = [
        str(e.get("entry_id") or e.get("_id")).removeprefix("export:") for e in ledger if e["kind"] == "exported"
    ]
    assert len(export_ids) == 1
    conversations = await accepted(http.get(f"{thread(s)}/conversations", params={"after": made["last"]}))
    assert {c["conversation"] for c in conversations["conversations"]} == {"main", "quest", "scout", "old"}

    async def context(path: str) -> list[Any]:
        found: list[Any] = (await accepted(http.get(f"/v1/tenants/{TENANT}/{path}/context")))["exchanges"]
        return found

    async def session_gone() -> bool:
        return await context(f"subjects/{s}") == []

    async def public_gone() -> bool:
        return await context("public") == []

    async def automation_gone() -> bool:
        return await context("agents/clock") == []

    async def facts_gone() -> bool:
        return bool((await accepted(http.get(f"/v1/tenants/{TENANT}/subjects/{s}/facts")))["facts"] == [])

    async def trace_gone() -> bool:
        return (await http.get(f"/v1/tenants/{TENANT}/runs/{made['run']}")).status_code == 404

    async def conversations_gone() -> bool:
        listed = await accepted(http.get(f"{thread(s)}/conversations"))
        return {c["conversation"] for c in listed["conversations"]} == {"main"}

    async def export_gone() -> bool:
        return (await http.get(f"/v1/tenants/{TENANT}/exports/{export_ids[0]}")).status_code == 404

    async def claim_gone() -> bool:
        body = {"tenant": TENANT, "subject": s, "question": "where?", "answer": "here", "idempotency_key": f"{s}-k"}
        answer = await accepted(http.post("/v1/exchanges", json=body))
        return bool(answer["idempotent"] is False)

    async def ledger_gone() -> bool:
        entries = await accepted(http.get(f"/v1/tenants/{TENANT}/ledger", params={"limit": 500}))
        return not any(e.get("at", "") <= made_at for e in entries)

    made_at = ledger[0]["at"]  # the newest entry once everything was made: older ones age out
    checks = {
        "the session": session_gone,
        "the public thread": public_gone,
        "the automation thread": automation_gone,
        "the facts": facts_gone,
        "the trace": trace_gone,
        "the finished task, subagent and main-kind conversations": conversations_gone,
        "the export bundle": export_gone,
        "the idempotency claim": claim_gone,
        "the ledger's entries": ledger_gone,
    }
    await asyncio.gather(*(eventually(what, check) for what, check in checks.items()))
    # the current conversation stays: seed 004 protects it from retention
    listed = await accepted(http.get(f"{thread(s)}/conversations"))
    assert [c["conversation"] for c in listed["conversations"]] == ["main"]


async def test_mains_compacted_and_reset_generations_run_out_by_themselves(http: httpx.AsyncClient) -> None:
    """`main` stays, but what a fold and a reset took out of its transcript goes GENERATION_SECONDS after
    its newest entry, with no command typed: the worker's retention run purges it and ledgers it."""
    s = "brief-bea"
    main = f"{thread(s)}/conversations/main"

    async def say(question: str) -> str:
        body = {"tenant": TENANT, "subject": s, "question": question, "answer": f"{question} answered"}
        return str((await accepted(http.post("/v1/exchanges", json=body)))["position"])

    async def generations(after: str | None = None) -> list[str]:
        params = {"after": after, "wait": 30} if after else {}
        listed = await accepted(http.get(f"{thread(s)}/conversations", params=params))
        found: list[str] = next(c["generations"] for c in listed["conversations"] if c["conversation"] == "main")
        return found

    async def texts(archives: str) -> list[str]:
        exported = await accepted(http.get(f"{main}/export", params={"archives": archives}))
        return [e["text"] for e in exported["entries"]]

    started = time.monotonic()
    for n in range(FOLD_EXCHANGES + 1):  # past the fold's count: the worker folds the older ones away
        at = await say(f"bea's question {n}")
    await eventually("the fold", lambda: _holds(generations(at), "compact@"))
    reset = await accepted(http.post(f"/v1/tenants/{TENANT}/subjects/{s}/reset", json={"reason": "issue 36"}))
    await eventually("the reset", lambda: _holds(generations(reset["position"]), "reset@"))
    last = await say("bea's newest question")
    await generations(last)  # an export's snapshot is its conversation's newest entry: this one's
    held = await texts("reset")
    print(f"folded and reset in {time.monotonic() - started:.1f} s; the reset archive holds {len(held)} entries")
    assert "bea's question 0" in held  # made, and not gone before its time

    async def generations_gone() -> bool:
        return await generations(last) == [] and await texts("reset") == []

    await eventually("main's compacted and reset generations", generations_gone)
    # the transcript stays, and so does main: only what the fold and the reset took out went
    assert await texts("current") == ["bea's newest question", "bea's newest question answered"]
    ledger = await accepted(http.get(f"/v1/tenants/{TENANT}/ledger", params={"limit": 500}))
    purges = [e for e in ledger if e["kind"] == "retention" and e.get("generations_until") is not None]
    assert purges and all(e["by"] == "schedule" and e["conversation"] == "main" for e in purges)
    assert sum(e["entries"] for e in purges) >= 2 * (FOLD_EXCHANGES + 1)  # every exchange before the reset


async def _holds(found: Awaitable[list[str]], prefix: str) -> bool:
    return any(name.startswith(prefix) for name in await found)


async def test_the_deadletter_topic_keeps_records_for_its_setting(live: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=live.bootstrap)
    await admin.start()
    try:
        described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, live.deadletter_topic)])
    finally:
        await admin.close()
    configs = {
        entry["config_names"]: entry["config_value"]
        for response in described
        for resource in response.to_object()["resources"]
        for entry in resource["config_entries"]
    }
    assert (configs["retention.ms"], configs["segment.ms"]) == (str(SECONDS * 1000), str(SECONDS * 1000))


def files_holding(root: Path, values: list[bytes]) -> dict[str, list[str]]:
    """Per planted value, the files under `root` whose bytes hold it."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for value in values:
            if value in data:
                found.setdefault(value.decode(), []).append(path.name)
    return found


async def rewritten(settings: Settings) -> bool:
    client = aioredis.Redis.from_url(settings.redis)
    try:
        info = await client.info("persistence")
    finally:
        await client.aclose()
    return not (info.get("aof_rewrite_in_progress") or info.get("rdb_bgsave_in_progress"))


async def test_an_erased_subjects_values_leave_redis_files_within_the_compaction_bound(
    http: httpx.AsyncClient, live: Settings
) -> None:
    s = f"planted-{uuid.uuid4().hex[:6]}"
    planted = [f"PLANTED-{uuid.uuid4().hex}".encode() for _ in range(6)]
    call = {"name": "look", "arguments": {"at": planted[2].decode()}, "result": planted[3].decode()}
    body: dict[str, Any] = {"tenant": TENANT, "subject": s, "question": planted[0].decode()}
    body |= {"answer": planted[1].decode(), "tool_calls": [call]}
    await accepted(http.post("/v1/exchanges", json=body))
    public = {"tenant": TENANT, "subject": s, "thread": "public", "question": planted[4].decode()}
    await accepted(http.post("/v1/exchanges", json=public))
    fact = await accepted(http.post(f"/v1/tenants/{TENANT}/subjects/{s}/facts", json={"text": planted[5].decode()}))
    await http.get(f"/v1/tenants/{TENANT}/subjects/{s}/context", params={"after": fact["position"], "wait": 30})
    erased = await http.post(f"/v1/tenants/{TENANT}/subjects/{s}/erase", json={"reason": "issue 36"})
    assert erased.status_code == 200 and erased.json()["done"], erased.text
    after_erasure = dt.datetime.now(dt.UTC)  # its ledger entry is older: a compaction covering this covers it
    mongo = mongo_client(live.mongo)

    async def compacted_after_erasure() -> bool:
        # compactions are ledgered with no tenant: read from the module's own privacy database
        ledger = mongo[live.privacy_database]["ledger"]
        done = await ledger.find_one({"kind": "compacted", "covers_until": {"$gte": after_erasure}})
        return done is not None and await rewritten(live)

    try:
        await eventually("a compaction after the erasure", compacted_after_erasure)
    finally:
        await mongo.close()
    async with httpx.AsyncClient() as plain:
        metrics = (await plain.get(f"http://127.0.0.1:{live.worker_metrics_port}/metrics")).text
    stamp = next(line for line in metrics.splitlines() if line.startswith("memlog_storage_compacted_timestamp_seconds"))
    assert float(stamp.split()[-1]) >= after_erasure.timestamp()
    assert files_holding(live.home / "redis", planted) == {}
    # SecantusDB has no `compact`: its checkpoint leaves freed pages' bytes until they are reused (reported)
    print("secantusdb files holding planted values:", files_holding(live.home / "mongo", planted))
