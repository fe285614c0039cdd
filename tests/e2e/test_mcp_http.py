"""The agent's tools over MCP on HTTP, bound by credential and path: a session opened with tenant A's
credential for subject S cannot read or write another subject or tenant, however the model fills in
the tools' arguments; and `memlog --api URL mcp` bridges stdio to it with a token and no master key."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from memlog.config.settings import Settings
from tests.e2e.conftest import StartMemlog, api_client

ROOT = Path(__file__).resolve().parents[2]
A, B = "tenant-a", "tenant-b"
TOKENS = {"tok-a": A, "tok-b": B}
AGENT = "helper"


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog(backend_tokens=TOKENS, operator_tokens=["tok-op"])


@pytest.fixture(scope="module")
def api(live: Settings) -> str:
    return f"http://{live.api_host}:{live.api_port}"


def mcp_url(api: str, tenant: str, subject: str, agent: str = AGENT) -> str:
    return f"{api}/v1/tenants/{tenant}/subjects/{subject}/agents/{agent}/mcp"


@asynccontextmanager
async def session(url: str, token: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as opened,
    ):
        await opened.initialize()
        yield opened


async def facts_of(http: httpx.AsyncClient, tenant: str, subject: str, after: str | None = None) -> list[str]:
    params = {"after": after, "wait": 10} if after else {}
    answer = await http.get(f"/v1/tenants/{tenant}/subjects/{subject}/facts", params=params)
    assert answer.status_code == 200, answer.text
    return sorted(f["text"] for f in answer.json()["facts"])


# Every way a model could name something other than the bound tenant, subject and agent.
ELSEWHERE: list[dict[str, Any]] = [
    {"tenant": B},
    {"subject": "other"},
    {"tenant": B, "subject": "other"},
    {"agent": "intruder"},
    {"tenant": A, "subject": "other"},
]
TOOL_ARGUMENTS = {
    "remember": {"text": "Lives at 1 Secret Lane"},
    "recall": {"query": "secret lane"},
    "forget": {"fact_id": "x"},
}


async def test_every_tool_refuses_another_tenant_subject_or_agent_however_named(live: Settings, api: str) -> None:
    subject = f"s-{uuid.uuid4().hex[:8]}"
    async with api_client(live, headers={"Authorization": "Bearer tok-op"}) as http:
        other = await http.post(f"/v1/tenants/{A}/subjects/other/facts", json={"text": "Secret lane of other"})
        theirs = await http.post(f"/v1/tenants/{B}/subjects/{subject}/facts", json={"text": "Secret lane in B"})
        other_id = other.json()["fact_id"]
        async with session(mcp_url(api, A, subject), "tok-a") as mcp:
            listed = await mcp.list_tools()
            assert sorted(tool.name for tool in listed.tools) == sorted(TOOL_ARGUMENTS)
            for name, arguments in TOOL_ARGUMENTS.items():
                for names in ELSEWHERE:
                    refused = await mcp.call_tool(name, {**arguments, **names})
                    assert refused.is_error, (name, names, refused)
                    assert "bound to another" in str(refused.content), refused.content
            # the bound subject's own memory works, and a fact of another subject is out of reach
            saved = await mcp.call_tool("remember", {"text": "Likes secret lanes"})
            assert not saved.is_error, saved
            assert saved.structured_content is not None
            position = saved.structured_content["position"]
            assert await facts_of(http, A, subject, position) == ["Likes secret lanes"]  # applied: recall sees it
            found = await mcp.call_tool("recall", {"query": "secret lanes"})
            assert found.structured_content is not None
            assert [f["text"] for f in found.structured_content["facts"]] == ["Likes secret lanes"]
            reached = await mcp.call_tool("forget", {"fact_id": other_id})
            assert reached.is_error, reached
        assert await facts_of(http, A, subject, position) == ["Likes secret lanes"]
        assert await facts_of(http, A, "other", other.json()["position"]) == ["Secret lane of other"]
        assert await facts_of(http, B, subject, theirs.json()["position"]) == ["Secret lane in B"]


async def test_a_credential_of_another_tenant_or_none_opens_no_session(api: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as http:
        crossed = await http.post(mcp_url(api, A, "s"), json=body, headers={**headers, "Authorization": "Bearer tok-b"})
        assert crossed.status_code == 403, crossed.text
        assert crossed.json()["detail"][0]["loc"] == ["header", "authorization"]
        anonymous = await http.post(mcp_url(api, A, "s"), json=body, headers=headers)
        assert anonymous.status_code == 401, anonymous.text
        bad_name = await http.post(
            mcp_url(api, A, "a%01b"), json=body, headers={**headers, "Authorization": "Bearer tok-a"}
        )
        assert bad_name.status_code == 422 and bad_name.json()["detail"][0]["loc"] == ["path", "subject"]


async def test_the_stdio_bridge_works_with_a_token_and_no_master_key(live: Settings, api: str) -> None:
    subject = f"s-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOG_")}  # no master key, no stores
    env["MEMLOG_API_TOKEN"] = "tok-a"
    command = ["-m", "memlog", "--api", api, "mcp", "--tenant", A, "--subject", subject, "--agent", AGENT]
    params = StdioServerParameters(command=sys.executable, args=command, env=env, cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
        await mcp.initialize()
        assert sorted(tool.name for tool in (await mcp.list_tools()).tools) == sorted(TOOL_ARGUMENTS)
        saved = await mcp.call_tool("remember", {"text": "Takes the night train"})
        assert not saved.is_error and saved.structured_content is not None, saved
        refused = await mcp.call_tool("recall", {"query": "train", "subject": "other"})
        assert refused.is_error
    async with api_client(live, headers={"Authorization": "Bearer tok-a"}) as http:
        assert await facts_of(http, A, subject, saved.structured_content["position"]) == ["Takes the night train"]
