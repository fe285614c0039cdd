"""Tenant knowledge and recall's reach, on the real stack through the worker and the API: facts of the
tenant recalled for every subject as scoped, never exported or erased with a subject; the recall tool's
limit, exclude and cursor; search paging."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from tests.e2e.conftest import StartMemlog, context_of

T = "realm"
K = "keepers"  # agents keep its knowledge too


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog(
        facts_max=2,
        tenant_facts_max=4,
        tenant_facts_from_agents=["realm", "keepers"],
        embeddings="none",  # keyword ranking: what these tests check does not depend on a model
    )


def bearing(read: dict[str, Any]) -> list[dict[str, Any]]:
    """The facts of a read labelled as bearing on its question."""
    return [fact for fact in read["facts"] if fact["bears"]]


async def accepted(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_tenant_knowledge_is_recalled_for_every_subject_as_scoped(http: httpx.AsyncClient) -> None:
    rule = await accepted(
        await http.post(f"/v1/tenants/{T}/facts", json={"text": "keep-inventory is on in the nether"})
    )
    own = await accepted(
        await http.post(
            f"/v1/tenants/{T}/facts", json={"text": "the builder bot places at most 64 blocks", "agent": "builder"}
        )
    )
    wait = {"after": f"{rule['position']},{own['position']}", "wait": 30}
    for subject in ("ann", "bob"):
        read = await context_of(
            http, T, subject, question="is keep-inventory on in the nether?", agent="helper", **wait
        )
        assert [(f["text"], f["belongs_to"]) for f in bearing(read)] == [
            ("keep-inventory is on in the nether", "tenant")
        ]
        assert "[tenant] keep-inventory is on in the nether" in read["rendered_facts"]
    question = "how many blocks may the builder bot place?"
    assert [f["fact_id"] for f in bearing(await context_of(http, T, "ann", question=question, agent="builder"))] == [
        own["fact_id"]
    ]
    # the others are given, not labelled bears; never another agent's own fact
    helper = (await context_of(http, T, "ann", question=question, agent="helper"))["facts"]
    assert own["fact_id"] not in {f["fact_id"] for f in helper} and not any(f["bears"] for f in helper)
    nobody = (await context_of(http, T, "ann", question=question))["facts"]  # no agent named: shared only
    assert own["fact_id"] not in {f["fact_id"] for f in nobody} and rule["fact_id"] in {f["fact_id"] for f in nobody}
    # another tenant never sees it
    assert (await context_of(http, "elsewhere", "ann", question="keep-inventory nether", agent="helper"))["facts"] == []
    listed = (await http.get(f"/v1/tenants/{T}/facts")).json()
    assert {f["fact_id"] for f in listed["facts"]} >= {rule["fact_id"], own["fact_id"]} and listed["subject"] is None
    by_helper = (await http.get(f"/v1/tenants/{T}/facts", params={"agent": "helper"})).json()["facts"]
    assert own["fact_id"] not in {f["fact_id"] for f in by_helper}


async def test_tenant_knowledge_has_its_own_limit_and_is_edited_and_deleted(http: httpx.AsyncClient) -> None:
    tenant = "limits"
    saved = [
        await accepted(await http.post(f"/v1/tenants/{tenant}/facts", json={"text": f"rule number {n}"}))
        for n in range(4)
    ]
    refused = await http.post(f"/v1/tenants/{tenant}/facts", json={"text": "one rule too many"})
    assert refused.status_code == 422 and "4 facts" in refused.text and "tenant" in refused.text
    # a subject's own limit (2) is not touched by the tenant's 4 facts
    for n in range(2):
        await accepted(await http.post(f"/v1/tenants/{tenant}/subjects/cy/facts", json={"text": f"cy fact {n}"}))
    first = saved[0]["fact_id"]
    edited = await accepted(
        await http.patch(
            f"/v1/tenants/{tenant}/facts/{first}",
            json={"text": "rule number zero"},
            params={"after": saved[-1]["position"]},
        )
    )
    listed = (await http.get(f"/v1/tenants/{tenant}/facts", params={"after": edited["position"], "wait": 30})).json()
    assert "rule number zero" in {f["text"] for f in listed["facts"]}
    gone = await accepted(await http.delete(f"/v1/tenants/{tenant}/facts/{first}"))
    listed = (await http.get(f"/v1/tenants/{tenant}/facts", params={"after": gone["position"], "wait": 30})).json()
    assert first not in {f["fact_id"] for f in listed["facts"]}
    missing = await http.delete(f"/v1/tenants/{tenant}/facts/no-such-fact")
    assert missing.status_code == 404 and "no-such-fact" in missing.text
    bad = await http.post(f"/v1/tenants/{tenant}/facts", json={"text": "x", "scope": "agent"})
    assert bad.status_code == 422 and "agent" in bad.text


async def test_erasing_or_exporting_a_subject_leaves_tenant_knowledge_alone(http: httpx.AsyncClient) -> None:
    tenant = "privacy-realm"
    rule = await accepted(
        await http.post(f"/v1/tenants/{tenant}/facts", json={"text": "backups are taken every six hours"})
    )
    mine = await accepted(
        await http.post(f"/v1/tenants/{tenant}/subjects/dan/facts", json={"text": "dan plays on tuesdays"})
    )
    await context_of(http, tenant, "dan", after=f"{rule['position']},{mine['position']}", wait=30)
    exported = await http.post(f"/v1/tenants/{tenant}/subjects/dan/export")
    assert exported.status_code == 200, exported.text
    bundle = exported.text
    assert "dan plays on tuesdays" in bundle and "backups are taken" not in bundle
    json.loads(bundle)
    erased = await http.post(f"/v1/tenants/{tenant}/subjects/dan/erase")
    assert erased.status_code == 200 and erased.json()["done"] is True, erased.text
    assert erased.json()["ledger"]["deleted"]["facts"] == 1
    read = await context_of(http, tenant, "dan", question="when are backups taken?", agent="helper")
    assert [f["text"] for f in read["facts"]] == ["backups are taken every six hours"]
    listed = (await http.get(f"/v1/tenants/{tenant}/facts")).json()["facts"]
    assert [f["text"] for f in listed] == ["backups are taken every six hours"]


async def test_an_agent_saves_tenant_knowledge_only_where_the_tenant_allows_it(http: httpx.AsyncClient) -> None:
    allowed = await http.post(
        f"/v1/tenants/{T}/subjects/eve/agents/helper/tools/remember",
        json={"arguments": {"text": "the spawn shop opens at noon", "scope": "tenant"}},
    )
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["belongs_to"] == "tenant"
    refused = await http.post(
        "/v1/tenants/other/subjects/eve/agents/helper/tools/remember",
        json={"arguments": {"text": "the spawn shop opens at noon", "scope": "tenant"}},
    )
    assert refused.status_code == 422 and "MEMLOG_TENANT_FACTS_FROM_AGENTS" in refused.text
    read = await context_of(
        http, T, "fay", question="when does the spawn shop open?", agent="miner", after=allowed.json()["position"]
    )
    assert [(f["text"], f["belongs_to"]) for f in bearing(read)] == [("the spawn shop opens at noon", "tenant")]


async def test_the_recall_tool_and_search_go_further_with_limit_exclude_and_a_cursor(
    http: httpx.AsyncClient,
) -> None:
    tenant, positions = "paging", []
    for n in range(4):
        saved = await accepted(
            await http.post(f"/v1/tenants/{tenant}/facts", json={"text": f"the diamond vault {n} is guarded"})
        )
        positions.append(saved["position"])
    await http.get(f"/v1/tenants/{tenant}/facts", params={"after": ",".join(positions), "wait": 30})
    tool = f"/v1/tenants/{tenant}/subjects/gus/agents/helper/tools/recall"
    first = (await http.post(tool, json={"arguments": {"query": "diamond vault guarded", "limit": 3}})).json()
    assert len(first["facts"]) == 3 and first["next_cursor"]
    rest = (
        await http.post(
            tool, json={"arguments": {"query": "diamond vault guarded", "limit": 3, "cursor": first["next_cursor"]}}
        )
    ).json()
    assert len(rest["facts"]) == 1 and rest["next_cursor"] is None
    every = [f["fact_id"] for f in first["facts"] + rest["facts"]]
    assert len(set(every)) == 4
    skipped = (
        await http.post(tool, json={"arguments": {"query": "diamond vault guarded", "exclude": every[:3]}})
    ).json()
    assert [f["fact_id"] for f in skipped["facts"]] == every[3:]
    other = await http.post(tool, json={"arguments": {"query": "something else", "cursor": first["next_cursor"]}})
    assert other.status_code == 422 and "cursor" in other.text
    bad = await http.post(tool, json={"arguments": {"query": "x", "limit": 0}})
    assert bad.status_code == 422 and "limit" in bad.text
    searched = (await http.get(f"/v1/tenants/{tenant}/facts", params={"q": "diamond vault", "limit": 2})).json()
    assert len(searched["facts"]) == 2 and searched["next_cursor"]
    more = (
        await http.get(
            f"/v1/tenants/{tenant}/facts", params={"q": "diamond vault", "limit": 2, "cursor": searched["next_cursor"]}
        )
    ).json()
    assert len(more["facts"]) == 2 and more["next_cursor"] is None
    assert {f["fact_id"] for f in searched["facts"] + more["facts"]} == set(every)


async def test_an_agent_forgets_only_the_tenant_knowledge_an_agent_saved(http: httpx.AsyncClient) -> None:
    """Issue 41: tenant knowledge records who wrote it, and an agent's forget leaves the backend's alone
    (unless MEMLOG_AGENTS_FORGET_BACKEND_KNOWLEDGE)."""
    tool = f"/v1/tenants/{K}/subjects/gil/agents/helper/tools"
    by_hand = await accepted(
        await http.post(f"/v1/tenants/{K}/facts", json={"text": "pvp is off in the spawn", "agent": "helper"})
    )
    saved = await http.post(tool + "/remember", json={"arguments": {"text": "the mine is east", "scope": "tenant"}})
    assert saved.status_code == 200, saved.text
    after = f"{by_hand['position']},{saved.json()['position']}"
    listed = (await http.get(f"/v1/tenants/{K}/facts", params={"after": after, "wait": 30})).json()["facts"]
    sources = {f["fact_id"]: f["source"] for f in listed}
    assert (sources[by_hand["fact_id"]], sources[saved.json()["fact_id"]]) == ("backend", "agent")

    refused = await http.post(tool + "/forget", json={"arguments": {"fact_id": by_hand["fact_id"]}})
    assert refused.status_code == 403 and "MEMLOG_AGENTS_FORGET_BACKEND_KNOWLEDGE" in refused.text
    forgotten = await http.post(tool + "/forget", json={"arguments": {"fact_id": saved.json()["fact_id"]}})
    assert forgotten.status_code == 200, forgotten.text
    listed = (
        await http.get(f"/v1/tenants/{K}/facts", params={"after": forgotten.json()["position"], "wait": 30})
    ).json()["facts"]
    assert by_hand["fact_id"] in {f["fact_id"] for f in listed}
    assert saved.json()["fact_id"] not in {f["fact_id"] for f in listed}
