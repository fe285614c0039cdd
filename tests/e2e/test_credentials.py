"""Backend credentials are bound to a tenant on every route; operator routes refuse backend credentials."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from tests.e2e.conftest import api_client, memlog, own_settings

PUBLIC = {("get", "/healthz"), ("get", "/readyz"), ("get", "/v1/tools")}
OPERATOR = {
    ("get", "/v1/tenants/{tenant}/runs"),
    ("get", "/v1/tenants/{tenant}/runs/{run_id}"),
    ("get", "/v1/tenants/{tenant}/runs/{run_id}/trace"),
    ("post", "/v1/tenants/{tenant}/subjects/{subject}/erase"),
    ("post", "/v1/tenants/{tenant}/subjects/{subject}/export"),
    ("get", "/v1/tenants/{tenant}/exports/{request_id}"),
    ("get", "/v1/tenants/{tenant}/ledger"),
    ("post", "/v1/replays"),
    ("get", "/v1/replays/{replay_id}"),
    ("post", "/v1/tenants/{tenant}/threads/{thread}/conversations/{conversation}/purge"),
    ("post", "/v1/tenants/{tenant}/retention"),
    ("get", "/v1/tenants/{tenant}/search"),
}
# operator actions over every tenant at once: the only routes that name no tenant
ALL_TENANTS = {("post", "/v1/replays"), ("get", "/v1/replays/{replay_id}")}
PATH_VALUES = {
    "replay_id": "r",
    "request_id": "q",
    "subject": "s",
    "agent": "a",
    "fact_id": "f",
    "run_id": "r",
    "exchange_id": "x",
    "name": "recall",
    "thread": "session:s",
    "conversation": "main",
    "entry_id": "x.q",
}


def body_for(path: str, tenant: str) -> dict[str, Any] | None:
    if path == "/v1/exchanges":
        return {"tenant": tenant, "subject": "s", "question": "q", "answer": "a"}
    if path.endswith("/question"):
        return {"tenant": tenant, "subject": "s", "question": "q"}
    if path.endswith("/tool-calls"):
        return {"tenant": tenant, "subject": "s", "call_index": 0, "name": "n"}
    if path.endswith("/answer"):
        return {"tenant": tenant, "subject": "s", "answer": "a"}
    if path == "/v1/receipts":
        return {"tenant": tenant, "subject": "s", "agent": "a", "exchange_id": "x", "call_index": 0, "result": "passed"}
    if path == "/v1/runs":
        return {"tenant": tenant, "agent": "a", "status": "ok", "started_at": 1, "ended_at": 2}
    if path.endswith("/facts") or path.endswith("/facts/{fact_id}"):
        return {"text": "a fact"}
    if path.endswith("/tools/{name}"):
        return {"arguments": {"query": "q"}}
    if path.endswith("/reset") or path.endswith("/archive") or path.endswith("/purge") or path.endswith("/retention"):
        return {}
    if path == "/v1/replays":
        return {"projection": "traces", "switch": False}
    if path.endswith("/rename") or path.endswith("/fork"):
        return {"target": "elsewhere"}
    return None


@pytest.fixture(scope="module")
def api(stack: Settings) -> Iterator[Settings]:
    with memlog(
        own_settings(
            stack,
            backend_tokens={"tok-a": "tenant-a", "tok-b": "tenant-b"},
            operator_tokens=["tok-op"],
            read_wait_seconds=1.0,  # no worker runs here: erase and export answer "not done yet" after the wait
        ),
        worker=False,
    ) as settings:
        yield settings


def routes(api: Settings) -> list[tuple[str, str]]:
    spec = httpx.get(f"http://127.0.0.1:{api.api_port}/openapi.json").json()
    return [(method, path) for path, item in spec["paths"].items() for method in item if (method, path) not in PUBLIC]


async def call(client: httpx.AsyncClient, method: str, path: str, tenant: str, token: str | None) -> int:
    url = path.replace("{tenant}", tenant)
    for name, value in PATH_VALUES.items():
        url = url.replace("{" + name + "}", value)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = body_for(path, tenant)
    response = await client.request(method.upper(), url, json=body if method != "get" else None, headers=headers)
    return response.status_code


async def test_every_route_refuses_another_tenants_credential(api: Settings) -> None:
    covered = routes(api)
    # every route but the public ones names its tenant, in its path or in its body: a new one must too
    for method, path in covered:
        body = body_for(path, "t") or {}
        assert "{tenant}" in path or body.get("tenant") == "t" or (method, path) in ALL_TENANTS, (method, path)
    async with api_client(api, timeout=30) as client:
        for method, path in covered:
            if (method, path) in OPERATOR:
                continue
            assert await call(client, method, path, "tenant-b", "tok-a") == 403, (method, path)
            assert await call(client, method, path, "tenant-b", None) == 401, (method, path)
            assert await call(client, method, path, "tenant-b", "tok-unknown") == 401, (method, path)
            # its own tenant passes the credential check (what follows may still refuse the input)
            assert await call(client, method, path, "tenant-a", "tok-a") not in (401, 403), (method, path)
            # an operator may act on any tenant
            assert await call(client, method, path, "tenant-b", "tok-op") not in (401, 403), (method, path)


async def test_operator_routes_refuse_backend_credentials(api: Settings) -> None:
    async with api_client(api, timeout=30) as client:
        for method, path in OPERATOR:
            assert await call(client, method, path, "tenant-a", "tok-a") == 403, path
            assert await call(client, method, path, "tenant-a", None) == 401, path
            assert await call(client, method, path, "tenant-a", "tok-op") not in (401, 403), path


async def test_health_and_tool_definitions_stay_open(api: Settings) -> None:
    async with api_client(api, timeout=30) as client:
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/v1/tools")).status_code == 200
