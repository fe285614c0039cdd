"""Search across threads end to end (seed 004): an agent's explicit search over the threads it took
part in, and an operator's over every thread of a tenant; HTTP -> Kafka -> worker -> MongoDB -> HTTP,
with backend and operator credentials configured."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from tests.e2e.conftest import StartMemlog

TENANT = "castle-x"
BACKEND = {"Authorization": "Bearer tok-castle"}
OPERATOR = {"Authorization": "Bearer tok-op"}


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog(backend_tokens={"tok-castle": TENANT}, operator_tokens=["tok-op"])


async def record(http: httpx.AsyncClient, **body: Any) -> str:
    response = await http.post("/v1/exchanges", json={"tenant": TENANT, "answer": "noted", **body}, headers=BACKEND)
    assert response.status_code == 202, response.text
    position: str = response.json()["position"]
    return position


async def agent_search(http: httpx.AsyncClient, agent: str, q: str, **params: Any) -> httpx.Response:
    return await http.get(f"/v1/tenants/{TENANT}/agents/{agent}/search", params={"q": q, **params}, headers=BACKEND)


async def tenant_search(
    http: httpx.AsyncClient, q: str, headers: dict[str, str] = OPERATOR, **params: Any
) -> httpx.Response:
    return await http.get(f"/v1/tenants/{TENANT}/search", params={"q": q, **params}, headers=headers)


RECORDED: list[bool] = []


async def recorded(http: httpx.AsyncClient) -> None:
    """Two of smith's sessions and his automation thread, one of baker's, each with the phrase; then
    waits until the archive holds them all. Once per module."""
    if RECORDED:
        return
    positions = [
        await record(http, subject="ann", agent="smith", question="where is the lost anvil of the forge"),
        await record(http, subject="ann", agent="smith", question="and the bellows?"),
        await record(http, subject="bob", agent="smith", question="I found the lost anvil by the river"),
        await record(http, subject="smith", thread="automation", agent="smith", question="lost anvil inventory"),
        await record(http, subject="cid", agent="baker", question="the baker heard of a lost anvil"),
        await record(http, subject="ann", agent="baker", question="is the lost anvil for sale"),
    ]
    for position in positions:
        waited = await tenant_search(http, "anything", after=position)
        assert waited.status_code == 200, waited.text
    RECORDED.append(True)


async def test_an_agent_finds_a_phrase_in_its_own_threads_and_none_of_anothers(http: httpx.AsyncClient) -> None:
    await recorded(http)
    page = await agent_search(http, "smith", "lost anvil", neighbours=0)
    assert page.status_code == 200, page.text
    results = page.json()["results"]
    assert sorted(r["thread"] for r in results) == ["automation:smith", "session:ann", "session:bob"]
    assert all(r["match"] == "phrase" and r["enters_prompt"] is False for r in results)
    assert all(r["agent"] == "smith" and r["conversation"] == "main" for r in results)
    assert all("baker" not in r["excerpt"] and "for sale" not in r["excerpt"] for r in results)
    assert {r["source_ref"]["thread"] for r in results} == {r["thread"] for r in results}
    baker = (await agent_search(http, "baker", "lost anvil")).json()["results"]
    assert sorted((r["thread"], r["excerpt"]) for r in baker) == [
        ("session:ann", "is the lost anvil for sale"),
        ("session:cid", "the baker heard of a lost anvil"),
    ]
    # neighbours are the agent's own: in ann's session smith sees his answers and questions, not baker's
    ann = next(r for r in (await agent_search(http, "smith", "bellows", neighbours=3)).json()["results"])
    assert [n["excerpt"] for n in ann["neighbours"]] == [
        "where is the lost anvil of the forge",
        "noted",
        "noted",
    ]
    assert all(n["enters_prompt"] is False for n in ann["neighbours"])


async def test_the_operator_searches_across_agents_and_a_backend_token_is_refused(http: httpx.AsyncClient) -> None:
    await recorded(http)
    page = await tenant_search(http, "lost anvil", neighbours=0)
    assert page.status_code == 200, page.text
    results = page.json()["results"]
    assert {r["agent"] for r in results} == {"smith", "baker"}
    assert {r["thread"] for r in results} >= {"session:ann", "session:bob", "session:cid", "automation:smith"}
    assert all(r["enters_prompt"] is False for r in results)
    refused = await tenant_search(http, "lost anvil", headers=BACKEND)
    assert refused.status_code == 403, refused.text
    assert (await tenant_search(http, "lost anvil", headers={})).status_code == 401


async def test_cursors_page_and_a_bad_or_foreign_cursor_is_refused(http: httpx.AsyncClient) -> None:
    await recorded(http)
    whole = (await tenant_search(http, "lost anvil", neighbours=0, limit=200)).json()
    assert whole["next_cursor"] is None
    seen: list[str] = []
    cursor = None
    for _ in range(len(whole["results"]) + 1):
        params: dict[str, Any] = {"limit": 2, "neighbours": 0, **({"cursor": cursor} if cursor else {})}
        page = await tenant_search(http, "lost anvil", **params)
        assert page.status_code == 200, page.text
        seen += [f"{r['thread']}/{r['entry_id']}" for r in page.json()["results"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"{r['thread']}/{r['entry_id']}" for r in whole["results"]]
    assert len(set(seen)) == len(seen) >= 5
    first = (await agent_search(http, "smith", "lost anvil", limit=1)).json()
    assert first["next_cursor"]
    following = await agent_search(http, "smith", "lost anvil", limit=1, cursor=first["next_cursor"])
    assert (
        following.status_code == 200 and following.json()["results"][0]["entry_id"] != first["results"][0]["entry_id"]
    )
    for bad in ("not-a-cursor", first["next_cursor"][:-4]):
        refused = await agent_search(http, "smith", "lost anvil", cursor=bad)
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"][-1] == "cursor", refused.text
    foreign = [
        await agent_search(http, "baker", "lost anvil", cursor=first["next_cursor"]),
        await agent_search(http, "smith", "anvil", cursor=first["next_cursor"]),
        await agent_search(http, "smith", "lost anvil", scope="current", cursor=first["next_cursor"]),
        await tenant_search(http, "lost anvil", cursor=first["next_cursor"]),
    ]
    assert [r.status_code for r in foreign] == [422] * 4
    assert (await agent_search(http, "smith", "lost anvil", limit=201)).status_code == 422
    assert (await agent_search(http, "smith", "lost anvil", neighbours=4)).status_code == 422
    assert (await agent_search(http, "smith", " ")).status_code == 422
