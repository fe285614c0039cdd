"""The lasting memory on the real broker and MongoDB-protocol server, through memlog's worker and API."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import free_port, settings_env
from memlog.services import open_services
from schemas.events import Envelope, FactRemembered, QuestionAsked, now_ms
from tests.e2e.conftest import StartMemlog, api_client, memlog, own_settings

DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog(fact_max_chars=200)


async def remember(http: httpx.AsyncClient, subject: str, text: str, **extra: Any) -> dict[str, Any]:
    tenant = extra.pop("tenant", "castle")
    response = await http.post(f"/v1/tenants/{tenant}/subjects/{subject}/facts", json={"text": text, **extra})
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


async def facts(http: httpx.AsyncClient, subject: str, after: str | None = None, **params: Any) -> list[dict[str, Any]]:
    query = {**params, **({"after": after} if after else {})}
    response = await http.get(f"/v1/tenants/castle/subjects/{subject}/facts", params=query)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["facts"]
    return found


async def recalled(
    http: httpx.AsyncClient, subject: str, question: str, agent: str, after: str | None = None, tenant: str = "castle"
) -> list[str]:
    """The facts that bear on the question (labelled `bears`); the others given after them are left out."""
    return [fact["text"] for fact in await received(http, subject, question, agent, after, tenant) if fact["bears"]]


async def received(
    http: httpx.AsyncClient, subject: str, question: str, agent: str, after: str | None = None, tenant: str = "castle"
) -> list[dict[str, Any]]:
    """Every fact the context read gives, bearing or not."""
    params = {"question": question, "agent": agent, **({"after": after} if after else {})}
    response = await http.get(f"/v1/tenants/{tenant}/subjects/{subject}/context", params=params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["facts"]
    return found


async def test_a_shared_fact_is_recalled_by_every_agent_and_an_agent_scoped_one_only_by_its_own(
    http: httpx.AsyncClient,
) -> None:
    await remember(http, "ann", "the guild meets on fridays", scope="shared", agent="smith", source="agent")
    last = await remember(http, "ann", "owes the smith ten iron", scope="agent", agent="smith", source="agent")
    assert await recalled(http, "ann", "when does the guild meet?", "smith", last["position"]) == [
        "the guild meets on fridays"
    ]
    assert await recalled(http, "ann", "when does the guild meet?", "baker") == ["the guild meets on fridays"]
    assert await recalled(http, "ann", "what do I owe the smith?", "smith") == ["owes the smith ten iron"]
    assert await recalled(http, "ann", "what do I owe the smith?", "baker") == []


async def test_a_subjects_facts_never_reach_another_subject_or_tenant(http: httpx.AsyncClient) -> None:
    last = await remember(http, "bea", "secret base under the lake", scope="shared")
    assert await recalled(http, "cid", "where is the secret base under the lake?", "any", last["position"]) == []
    assert await recalled(http, "bea", "secret base", "any", tenant="other-server") == []
    assert await recalled(http, "bea", "secret base", "any") == ["secret base under the lake"]


async def test_the_31st_fact_is_refused_naming_the_limit(http: httpx.AsyncClient) -> None:
    last = None
    for number in range(30):
        last = await remember(http, "dan", f"fact number {number}", scope="shared")
    assert last is not None
    assert len(await facts(http, "dan", last["position"])) == 30
    response = await http.post("/v1/tenants/castle/subjects/dan/facts", json={"text": "one more"})
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"][-1] == "facts" and "forget or revise" in detail["msg"]
    assert len(await facts(http, "dan")) == 30


async def test_of_concurrent_saves_at_29_facts_exactly_one_is_accepted_and_kept(http: httpx.AsyncClient) -> None:
    last = None
    for number in range(29):
        last = await remember(http, "kit", f"fact number {number}", scope="shared")
    assert last is not None
    url = "/v1/tenants/castle/subjects/kit/facts"
    answers = await asyncio.gather(*(http.post(url, json={"text": f"racing {n}"}) for n in range(10)))
    assert sorted(r.status_code for r in answers) == [202] + [422] * 9, [r.text for r in answers]
    (won,) = [r.json() for r in answers if r.status_code == 202]
    kept = await facts(http, "kit", won["position"])
    assert len(kept) == 30 and won["fact_id"] in {f["fact_id"] for f in kept}


async def test_quick_saves_past_the_limit_are_refused_at_once_and_none_accepted_is_dropped(
    http: httpx.AsyncClient,
) -> None:
    # no wait for the projection between saves: the limit holds on what was accepted, not on what it shows
    accepted: list[dict[str, Any]] = []
    refused = 0
    for number in range(35):
        response = await http.post("/v1/tenants/castle/subjects/lou/facts", json={"text": f"quick {number}"})
        if response.status_code == 202:
            accepted.append(response.json())
        else:
            assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == "facts"
            refused += 1
    assert (len(accepted), refused) == (30, 5)
    kept = await facts(http, "lou", accepted[-1]["position"])
    assert {f["fact_id"] for f in kept} == {a["fact_id"] for a in accepted}


async def test_a_fact_over_the_length_limit_is_refused(http: httpx.AsyncClient) -> None:
    response = await http.post("/v1/tenants/castle/subjects/eve/facts", json={"text": "x" * 201})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "text" and "200" in response.text
    assert await facts(http, "eve") == []


async def test_facts_expire_365_days_after_the_last_question_and_each_question_moves_that(
    http: httpx.AsyncClient, live: Settings
) -> None:
    now = now_ms()
    old = now - 400 * DAY_MS

    def envelope(subject: str, at: int) -> Envelope:
        return Envelope(tenant="castle", subject=subject, thread="session", producer="test", occurred_at=at)

    async with open_services(live, producer=True) as services:
        await services.producer.produce([FactRemembered(envelope("fay", old), "f1", "shared", "remembered long ago")])
        await services.producer.produce([FactRemembered(envelope("gil", old), "f1", "shared", "also long ago")])
        asked = await services.producer.produce([QuestionAsked(envelope("gil", now - 10 * DAY_MS), "x1", "hello")])
        last = await services.producer.produce([FactRemembered(envelope("zed", now), "f1", "shared", "marker")])
    await facts(http, "zed", f"{last.token()},{asked.token()}")
    assert await facts(http, "fay") == []  # past its 365 days: never returned, even before the TTL monitor runs
    assert [f["text"] for f in await facts(http, "gil")] == ["also long ago"]  # kept: asked 10 days ago


async def test_facts_are_edited_and_deleted_through_the_api(http: httpx.AsyncClient) -> None:
    kept = await remember(http, "hal", "base at 100 64 -20")
    doomed = await remember(http, "hal", "likes long answers")
    edited = await http.patch(
        f"/v1/tenants/castle/subjects/hal/facts/{kept['fact_id']}",
        json={"text": "base at 120 64 -20"},
        params={"after": kept["position"]},
    )
    assert edited.status_code == 202
    deleted = await http.delete(
        f"/v1/tenants/castle/subjects/hal/facts/{doomed['fact_id']}", params={"after": doomed["position"]}
    )
    assert deleted.status_code == 202
    after = f"{edited.json()['position']},{deleted.json()['position']}"
    assert [f["text"] for f in await facts(http, "hal", after)] == ["base at 120 64 -20"]
    # a deleted fact influences no later read
    assert "likes long answers" not in await recalled(http, "hal", "do I like long answers?", "any")
    missing = await http.delete("/v1/tenants/castle/subjects/hal/facts/no-such-fact")
    assert missing.status_code == 404 and "no fact" in missing.text
    unknown = await http.patch("/v1/tenants/castle/subjects/hal/facts/no-such-fact", json={"text": "x"})
    assert unknown.status_code == 404 and "no fact" in unknown.text
    cleared = await http.delete("/v1/tenants/castle/subjects/hal/facts")
    assert await facts(http, "hal", cleared.json()["position"]) == []


async def test_facts_are_listed_added_edited_and_deleted_through_the_cli(
    http: httpx.AsyncClient, live: Settings
) -> None:
    async def cli(*args: str) -> str:
        done = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "memlog",
            "facts",
            *args,
            env=settings_env(live),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,  # the log; stdout is the answer
        )
        output, errors = await done.communicate()
        assert done.returncode == 0, output + errors
        return output.decode()

    added = await cli("add", "castle", "ivy", "my", "dog", "is", "called", "Rex")
    fact_id, position = added.split()[1], added.split()[2].strip("()")
    assert [f["text"] for f in await facts(http, "ivy", position)] == ["my dog is called Rex"]
    edited = await cli("edit", "castle", "ivy", fact_id, "my dog is called Max")
    await facts(http, "ivy", edited.split()[-1].strip("()"))
    assert fact_id in await cli("list", "castle", "ivy") and "Max" in await cli("list", "castle", "ivy")
    removed = await cli("rm", "castle", "ivy", fact_id)
    assert await facts(http, "ivy", removed.split()[-1].strip("()")) == []


async def test_the_agents_tools_are_published_and_run(http: httpx.AsyncClient) -> None:
    tools = (await http.get("/v1/tools")).json()
    assert [t["function"]["name"] for t in tools] == ["remember", "recall", "forget"]
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in tools)
    base = "/v1/tenants/castle/subjects/jon/agents/allay/tools"
    asked = (
        await http.post(
            "/v1/exchanges",
            json={"tenant": "castle", "subject": "jon", "question": "remember my base", "exchange_id": "ex-jon-1"},
        )
    ).json()
    saved = await http.post(
        f"{base}/remember",
        json={
            "arguments": {"text": "jon's base is at 5 70 5", "scope": "agent"},
            "exchange_id": "ex-jon-1",
            "call_index": 0,
        },
    )
    assert saved.status_code == 200, saved.text
    result = saved.json()
    found = await http.get(f"/v1/tenants/castle/subjects/jon/facts?after={result['position']}")
    assert [f["text"] for f in found.json()["facts"]] == ["jon's base is at 5 70 5"]
    hits = (await http.post(f"{base}/recall", json={"arguments": {"query": "where is my base?"}})).json()["facts"]
    assert [h["text"] for h in hits] == ["jon's base is at 5 70 5"]
    # the call shows in the exchange's transcript
    ctx = (
        await http.get(
            "/v1/tenants/castle/subjects/jon/context",
            params={"after": f"{asked['position']},{result['transcript_position']}"},
        )
    ).json()
    assert ctx["exchanges"][0]["tool_calls"][0]["name"] == "remember"
    assert ctx["exchanges"][0]["tool_calls"][0]["result"]["saved"] is True
    gone = (await http.post(f"{base}/forget", json={"arguments": {"fact_id": result["fact_id"]}})).json()
    assert "position" in gone, gone
    assert await facts(http, "jon", gone["position"]) == []
    unknown = await http.post(f"{base}/teleport", json={"arguments": {}})
    assert unknown.status_code == 422 and "no tool" in unknown.text
    bad = await http.post(f"{base}/remember", json={"arguments": {"text": "x", "colour": "red"}})
    assert bad.status_code == 422 and "colour" in bad.text


async def test_recall_finds_ai_and_gives_the_others_after_it_labelled_not_matched(http: httpx.AsyncClient) -> None:
    await remember(http, "kim", "AI")
    await remember(http, "kim", "my favourite colour is green")
    last = await remember(http, "kim", "I build castles out of sandstone")
    given = await received(http, "kim", "what did I say about A.I.?", "any", last["position"])
    assert (given[0]["text"], given[0]["bears"]) == ("AI", True)
    assert [(f["text"], f["bears"]) for f in given[1:]] == [
        ("I build castles out of sandstone", False),
        ("my favourite colour is green", False),
    ]
    context = (await http.get("/v1/tenants/castle/subjects/kim/context", params={"question": "zzz xyzzy"})).json()
    assert context["facts"][0]["text"] == "I build castles out of sandstone"  # the newest first
    assert {(f["how"], f["bears"]) for f in context["facts"]} == {("recent", False)} and len(context["facts"]) == 3
    assert context["rendered_facts"] == (
        "(nothing memlog keeps bears on this question)\n"
        "Other facts you hold about kim, not matched to the question:\n"
        "- I build castles out of sandstone\n- my favourite colour is green\n- AI\n"
    )
    searched = await facts(http, "kim", q="colour")
    assert (searched[0]["text"], searched[0]["bears"]) == ("my favourite colour is green", True)


async def test_a_vague_question_or_none_gets_the_newest_facts(http: httpx.AsyncClient) -> None:
    for text in ("my farm is at 300 70 40", "I like short answers, as I told you before", "my dog is called Rex"):
        last = await remember(http, "ula", text)
    for question in ("what did I tell you before?", "what do you know about me?", None):
        params = {"agent": "any", "after": last["position"], **({"question": question} if question else {})}
        context = (await http.get("/v1/tenants/castle/subjects/ula/context", params=params)).json()
        assert [f["text"] for f in context["facts"]] == [
            "my dog is called Rex",
            "I like short answers, as I told you before",  # its words do not answer a vague question
            "my farm is at 300 70 40",
        ], question
        assert not any(f["bears"] for f in context["facts"]) and "not matched" in context["rendered_facts"]


async def test_the_strict_setting_gives_only_the_facts_that_bear_on_the_question(
    http: httpx.AsyncClient, live: Settings
) -> None:
    await remember(http, "vic", "my boat is moored at the north pier")
    last = await remember(http, "vic", "I collect old maps")
    await facts(http, "vic", last["position"])
    strict = live.model_copy(update={"api_port": free_port(), "recall_strict": True})
    with memlog(strict, worker=False):
        async with api_client(strict) as other:
            found = await received(other, "vic", "where is my boat?", "any")
            unrelated = await received(other, "vic", "zzz xyzzy", "any")
            none_asked = (await other.get("/v1/tenants/castle/subjects/vic/context")).json()
            filled = await other.get(
                "/v1/tenants/castle/subjects/vic/context", params={"question": "zzz xyzzy", "fill": "recent"}
            )
    assert [(f["text"], f["bears"]) for f in found] == [("my boat is moored at the north pier", True)]
    assert unrelated == [] and none_asked["facts"] == []
    newest = filled.json()["facts"][0]
    assert (newest["text"], newest["how"]) == ("I collect old maps", "recent")
    assert len(await received(http, "vic", "zzz xyzzy", "any")) == 2  # the default gives them all


async def test_the_tools_are_served_over_mcp(http: httpx.AsyncClient, live: Settings) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memlog", "mcp", "--agent", "allay"], env=settings_env(live)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        assert sorted(tool.name for tool in listed.tools) == ["forget", "recall", "remember"]
        saved = await session.call_tool(
            "remember", {"tenant": "castle", "subject": "mia", "text": "mia's farm is at 300 70 40"}
        )
        assert not saved.is_error, saved
        result = saved.structured_content
        assert result is not None and result["saved"] is True
        found = await facts(http, "mia", result["position"])
        assert [(f["text"], f["agent"], f["scope"]) for f in found] == [
            ("mia's farm is at 300 70 40", "allay", "agent")
        ]
        await remember(http, "mia", "mia's cat is called Tom", agent="allay")
        shared = await remember(http, "mia", "mia likes rain", scope="shared")
        await facts(http, "mia", shared["position"])
        hits = await session.call_tool("recall", {"tenant": "castle", "subject": "mia", "query": "where is my farm?"})
        assert hits.structured_content is not None
        over_mcp = [(h["text"], h["bears"], h["how"]) for h in hits.structured_content["facts"]]
        assert over_mcp[0] == ("mia's farm is at 300 70 40", True, "keyword") and len(over_mcp) == 3
        over_http = await http.post(
            "/v1/tenants/castle/subjects/mia/agents/allay/tools/recall",
            json={"arguments": {"query": "where is my farm?"}},
        )
        assert [(h["text"], h["bears"], h["how"]) for h in over_http.json()["facts"]] == over_mcp
        # with an exchange id the call renders in that exchange's transcript
        asked = await http.post(
            "/v1/exchanges",
            json={"tenant": "castle", "subject": "mia", "question": "my farm?", "exchange_id": "ex-mia-1"},
        )
        logged = await session.call_tool(
            "recall",
            {"tenant": "castle", "subject": "mia", "query": "farm", "exchange_id": "ex-mia-1", "call_index": 0},
        )
        assert logged.structured_content is not None
    after = f"{asked.json()['position']},{logged.structured_content['transcript_position']}"
    ctx = (await http.get("/v1/tenants/castle/subjects/mia/context", params={"after": after})).json()
    (call,) = ctx["exchanges"][0]["tool_calls"]
    assert call["name"] == "recall" and call["result"]["facts"][0]["text"] == "mia's farm is at 300 70 40"


async def test_with_the_local_embedding_model_a_paraphrase_is_found(stack: Settings) -> None:
    with memlog(own_settings(stack, embeddings="local")) as settings:
        async with api_client(settings) as http:
            await remember(http, "nia", "I prefer short answers")
            await remember(http, "nia", "my base is at 100 64 -20")
            last = await remember(http, "nia", "my dog is called Rex")
            response = await http.get(
                "/v1/tenants/castle/subjects/nia/context",
                params={"question": "keep your replies brief please", "agent": "allay", "after": last["position"]},
            )
            found = response.json()["facts"]
            stored = await http.get("/v1/tenants/castle/subjects/nia/facts")
    assert found[0]["text"] == "I prefer short answers" and found[0]["how"] == "similarity"
    assert len(stored.json()["facts"]) == 3
    async with open_services(settings) as services:
        state = await services.facts.load("castle", "nia")
    assert state is not None and {f.vector_model for f in state.facts} == {"all-MiniLM-L6-v2"}
    assert all(len(f.vector) == 384 for f in state.facts)


async def test_a_forgotten_fact_leaves_the_transcript_but_the_archive_keeps_its_original(
    http: httpx.AsyncClient,
) -> None:
    text = "keeps the spare key under the blue flowerpot"
    exchange = {"tenant": "castle", "subject": "fern", "question": "where is my key?", "exchange_id": "fern-x1"}
    assert (await http.post("/v1/exchanges", json=exchange)).status_code == 202
    tool = "/v1/tenants/castle/subjects/fern/agents/helper/tools"
    saved = await http.post(
        f"{tool}/remember", json={"arguments": {"text": text}, "exchange_id": "fern-x1", "call_index": 0}
    )
    assert saved.status_code == 200, saved.text
    answer = await http.post(
        "/v1/exchanges/fern-x1/answer", json={"tenant": "castle", "subject": "fern", "answer": "noted"}
    )
    assert answer.status_code == 202, answer.text
    url = "/v1/tenants/castle/subjects/fern/context"
    both = f"{answer.json()['position']},{saved.json()['position']}"  # the fact projected too: forget reads it
    before = (await http.get(url, params={"after": both, "wait": 30})).json()
    assert text in before["rendered"]

    forgot = await http.delete(f"/v1/tenants/castle/subjects/fern/facts/{saved.json()['fact_id']}")
    assert forgot.status_code == 202, forgot.text
    after = f"{forgot.json()['position']},{forgot.json()['transcript_position']}"
    read = await http.get(url, params={"after": after, "wait": 30, "question": "where is the key?"})
    assert read.status_code == 200, read.text
    body = read.json()
    assert text not in body["rendered"] and text not in json.dumps(body["exchanges"]), body
    assert "[forgotten]" in body["rendered"]
    assert body["facts"] == []

    archived = await http.get(
        "/v1/tenants/castle/threads/session:fern/conversations/main/export",
        params={"after": forgot.json()["transcript_position"], "wait": 30},
    )
    assert archived.status_code == 200, archived.text
    assert any(text in entry["text"] for entry in archived.json()["entries"])  # kept until purge or erasure


async def test_the_forget_tool_takes_the_fact_out_of_the_next_prompt(http: httpx.AsyncClient) -> None:
    text = "allergic to the cave spiders' venom"
    exchange = {"tenant": "castle", "subject": "gil", "question": "remember this", "exchange_id": "gil-x1"}
    assert (await http.post("/v1/exchanges", json=exchange)).status_code == 202
    tool = "/v1/tenants/castle/subjects/gil/agents/helper/tools"
    saved = await http.post(
        f"{tool}/remember", json={"arguments": {"text": text}, "exchange_id": "gil-x1", "call_index": 0}
    )
    fact_id = saved.json()["fact_id"]
    await http.get("/v1/tenants/castle/subjects/gil/facts", params={"after": saved.json()["position"], "wait": 30})
    await http.get(
        "/v1/tenants/castle/subjects/gil/context", params={"after": saved.json()["transcript_position"], "wait": 30}
    )
    forgot = await http.post(
        f"{tool}/forget", json={"arguments": {"fact_id": fact_id}, "exchange_id": "gil-x1", "call_index": 1}
    )
    assert forgot.status_code == 200, forgot.text
    after = f"{forgot.json()['position']},{forgot.json()['transcript_position']}"
    read = await http.get("/v1/tenants/castle/subjects/gil/context", params={"after": after, "wait": 30})
    body = read.json()
    assert text not in body["rendered"] and text not in json.dumps(body["exchanges"]), body


async def test_a_bad_name_is_refused_naming_it_before_any_wait_or_claim(http: httpx.AsyncClient) -> None:
    """Names are checked at the use case's entry, before it waits for `after` (a position never applied
    here: a wait would end in 503) or claims an idempotency key: facts, the archive's reads and operations."""
    late = {"wait": "0.5"}
    facts_at, threads_at = "facts.0.999999999", "threads.0.999999999"
    asks: list[tuple[str, str, dict[str, str], dict[str, Any] | None, list[str]]] = [
        (
            "GET",
            "/v1/tenants/castle/subjects/ann/facts",
            {"agent": "a\x01", "after": facts_at},
            None,
            ["query", "agent"],
        ),
        ("GET", "/v1/tenants/castle/facts", {"agent": "a\x01", "after": facts_at}, None, ["query", "agent"]),
        ("PATCH", "/v1/tenants/castle/subjects/a%01/facts/f1", {"after": facts_at}, {"text": "x"}, ["path", "subject"]),
        ("DELETE", "/v1/tenants/castle/subjects/a%01/facts/f1", {"after": facts_at}, None, ["path", "subject"]),
        ("POST", "/v1/tenants/castle/subjects/a%01/facts", {}, {"text": "x"}, ["path", "subject"]),
        ("POST", "/v1/tenants/castle/subjects/ann/agents/a%01/tools/recall", {}, {"arguments": {}}, ["path", "agent"]),
        (
            "GET",
            "/v1/tenants/castle/threads/session:ann/search",
            {"q": "tea", "conversation": "a\x01", "after": threads_at},
            None,
            ["query", "conversation"],
        ),
        (
            "GET",
            "/v1/tenants/castle/threads/session:ann/calendar",
            {"conversation": "a\x01", "after": threads_at},
            None,
            ["query", "conversation"],
        ),
    ]
    asks += [
        ("GET", "/v1/tenants/castle/agents/a%01/search", {"q": "tea", "after": threads_at}, None, ["path", "agent"]),
        (
            "GET",
            "/v1/tenants/castle/threads/session:a%01/conversations",
            {"after": threads_at},
            None,
            ["path", "thread"],
        ),
        (
            "POST",
            "/v1/tenants/castle/threads/session:ann/conversations/a%01/compact",
            {"after": threads_at},
            None,
            ["path", "conversation"],
        ),
    ]
    for method, path, params, body, loc in asks:
        response = await http.request(
            method, path, params={**params, **late}, json=body, headers={"Idempotency-Key": "bad-name-1"}
        )
        assert (response.status_code, response.json()["detail"][0]["loc"]) == (422, loc), (method, path, response.text)
        assert "control character" in response.json()["detail"][0]["msg"]
