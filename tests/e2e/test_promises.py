"""Promises of the seeds that nothing else holds, each failing if it breaks. memlog's own worker and API
processes on the local stack, with seed 000's thresholds (nothing tuned for the test).

- 0.7 (seed 000): "The fold runs after the answer, so the player doesn't wait"; only past 42,000 tokens
  does a read fold first. (The worker's side, and the unanswered question, are in tests/unit/test_fold_promises.py.)
- 0.17 (seed 000): "The agent saves them itself and says so": the tool descriptions tell it to, on
  `/v1/tools` and over MCP alike.
- 4.28 (seed 004): no automatic archive recall: a context read returns no archived material and makes no
  archive query.
- 4.31 (seed 004): "Original resolution prefers the live entry and then a retained archived occurrence."
"""

from __future__ import annotations

import asyncio
import sys
import time

import httpx
import httpx2
import pytest

from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from memlog.dev.processes import settings_env
from tests.e2e.conftest import StartMemlog, context_of, recorded

TENANT = "castle-promises"
ARCHIVE_COLLECTIONS = ("entry_groups", "conversations", "entries", "archive")


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog()


def thread(subject: str) -> str:
    return f"/v1/tenants/{TENANT}/threads/session:{subject}"


async def test_a_read_between_32k_and_42k_tokens_answers_unfolded_and_the_worker_folds_after_the_answer(
    http: httpx.AsyncClient,
) -> None:
    subject = "fold-after"
    for number in range(3):  # about 27,000 tokens, answered
        await recorded(http, TENANT, subject, f"question {number} " + "stone " * 9_000, f"answer {number}")
    # the fourth question takes the session to about 36,000 tokens; its answer has not come yet
    asked = await recorded(http, TENANT, subject, "question 3 " + "stone " * 9_000, exchange_id="fold-after-3")
    ctx = await context_of(http, TENANT, subject, asked)
    assert 32_000 < ctx["tokens"] < 42_000
    assert ctx["summary_notice"] is None and ctx["summary"] == "" and len(ctx["exchanges"]) == 4  # at once
    answered = await http.post(
        "/v1/exchanges/fold-after-3/answer", json={"tenant": TENANT, "subject": subject, "answer": "answer 3"}
    )
    assert answered.status_code == 202, answered.text
    after = await context_of(http, TENANT, subject, answered.json()["position"])
    deadline = time.monotonic() + 60
    while after["summary_notice"] is None and time.monotonic() < deadline:  # the worker folds, afterwards
        await asyncio.sleep(0.2)
        after = await context_of(http, TENANT, subject)
    assert after["summary_notice"] is not None and after["summary"]
    assert after["tokens"] < 32_000 and after["exchanges"][-1]["answer"] == "answer 3"


async def test_the_tool_descriptions_tell_the_agent_to_save_facts_itself_and_say_so(
    http: httpx.AsyncClient, live: Settings
) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    listed = (await http.get("/v1/tools")).json()
    tools = {tool["function"]["name"]: tool["function"]["description"] for tool in listed}
    remember = tools["remember"]
    assert remember.startswith("Save one short, lasting fact about the user")  # the agent saves it itself
    assert "Say so to the user when you do." in remember  # ... and says so
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memlog", "mcp", "--agent", "allay"], env=settings_env(live)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        over_stdio = {tool.name: tool.description for tool in (await session.list_tools()).tools}
    assert over_stdio == tools  # one wording on every face
    url = f"http://127.0.0.1:{live.api_port}/v1/tenants/{TENANT}/subjects/ada/agents/allay/mcp"
    async with (
        httpx2.AsyncClient(timeout=60) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        over_http = {tool.name: tool.description or "" for tool in (await session.list_tools()).tools}
    # the MCP endpoint the API serves adds only that the session is bound to its tenant, subject and agent
    assert {name: text.startswith(tools[name]) for name, text in over_http.items()} == dict.fromkeys(tools, True)


async def archive_reads(settings: Settings) -> int:
    """Reads the MongoDB-protocol server has counted on the namespace's archive collections (`top`)."""
    client = mongo_client(settings.mongo)
    try:
        totals = (await client.admin.command("top"))["totals"]
    finally:
        await client.close()
    names = {f"{settings.mongo_db_name}.{collection}" for collection in ARCHIVE_COLLECTIONS}
    return sum(
        usage["queries"]["count"] + usage["getmore"]["count"] + usage["commands"]["count"]
        for name, usage in totals.items()
        if name in names
    )


async def test_a_context_read_returns_no_archived_material_and_makes_no_archive_query(
    http: httpx.AsyncClient, live: Settings
) -> None:
    subject = "no-recall"
    await recorded(http, TENANT, subject, "where is the obsidian lantern?", "under the third willow")
    reset = await http.post(f"{thread(subject)}/conversations/main/reset", json={"reason": "new quest"})
    assert reset.status_code == 202, reset.text
    last = await recorded(http, TENANT, subject, "what now?", "follow the river")
    # the archive holds the old generation: an explicit search finds it
    found = await http.get(
        f"{thread(subject)}/search", params={"q": "obsidian lantern", "scope": "history", "after": last}
    )
    assert found.status_code == 200 and found.json()["results"], found.text
    await context_of(http, TENANT, subject, last)  # the session has applied everything too
    before = await archive_reads(live)
    assert before > 0  # the counter counts: the search above read the archive
    for _ in range(5):
        ctx = await context_of(http, TENANT, subject)
        assert "obsidian" not in str(ctx) and "willow" not in str(ctx)
        assert [exchange["question"] for exchange in ctx["exchanges"]] == ["what now?"]
    assert await archive_reads(live) == before


async def test_an_entry_live_and_in_a_fork_or_reset_archive_resolves_to_the_live_one(http: httpx.AsyncClient) -> None:
    subject = "live-wins"
    last = await recorded(http, TENANT, subject, "which gate is open?", "the red gate", exchange_id="gate-1")
    forked = await http.post(
        f"{thread(subject)}/conversations/main/fork", json={"target": "side"}, params={"after": last}
    )
    assert forked.status_code == 202, forked.text
    entry = f"{thread(subject)}/entries/gate-1.q"
    # in main, live, and copied into the fork: the live entry of the current conversation
    both = (await http.get(entry, params={"after": forked.json()["position"]})).json()
    assert (both["conversation"], both["provenance"], both["forked_from"]) == ("main", "active", None)
    # main reset: its occurrence is now in a reset archive, the fork's is live, and wins
    reset = await http.post(f"{thread(subject)}/conversations/main/reset", json={})
    assert reset.status_code == 202, reset.text
    resolved = (await http.get(entry, params={"after": reset.json()["position"]})).json()
    assert (resolved["conversation"], resolved["provenance"]) == ("side", "active")
    archived = (await http.get(entry, params={"conversation": "main"})).json()
    assert archived["provenance"] == "reset"  # the archived occurrence is still there, and retrievable
    original = await http.get(f"{entry}/original")
    assert original.status_code == 200 and "which gate is open?" in original.text
