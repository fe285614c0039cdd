"""Receipts (seed 004, evidence you can check) on the real broker and MongoDB-protocol server: an answer
verified, one left unverified, one incomplete, and a late receipt turning unverified into verified, each
on the context read and on the archived entries (search, export, an entry read)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from schemas.events import now_ms
from tests.e2e.conftest import StartMemlog
from tests.e2e.reads import until_ok

MINUTE_MS = 60_000


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    """One worker and an API where a call with no result is incomplete after 1 s."""
    return start_memlog(tool_result_timeout_seconds=1.0)


async def posted(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> str:
    response = await http.post(url, json=body)
    assert response.status_code == 202, response.text[:500]
    position: str = response.json()["position"]
    return position


async def receipt(http: httpx.AsyncClient, subject: str, exchange_id: str, result: str, **more: Any) -> str:
    body = {"tenant": "castle", "subject": subject, "agent": "allay", "exchange_id": exchange_id, "result": result}
    return await posted(http, "/v1/receipts", {**body, **more})


async def chest(http: httpx.AsyncClient, subject: str, exchange_id: str, word: str) -> str:
    """An answer that relies on two tool calls; `word` finds it in the archive."""
    return await posted(
        http,
        "/v1/exchanges",
        {
            "tenant": "castle",
            "subject": subject,
            "exchange_id": exchange_id,
            "question": f"open the {word} chest and count the keys",
            "tool_calls": [
                {"name": "open_chest", "arguments": {"chest": word}, "result": {"opened": True}},
                {"name": "count", "arguments": {"what": "keys"}, "result": {"keys": 3}},
            ],
            "answer": f"The {word} chest holds 3 keys.",
        },
    )


async def on_context(http: httpx.AsyncClient, subject: str, after: str) -> dict[str, Any]:
    response = await until_ok(http, f"/v1/tenants/castle/subjects/{subject}/context", {"after": after})
    assert response.status_code == 200, response.text[:500]
    (exchange,) = response.json()["exchanges"]
    found: dict[str, Any] = exchange
    return found


async def on_archive(http: httpx.AsyncClient, subject: str, word: str, after: str) -> dict[str, Any]:
    """The exchange's archived entries as export lists them, the search hit for `word`, and one entry read:
    each entry's `answer_state`, and the tool and answer entries' `receipt`."""
    thread = f"/v1/tenants/castle/threads/session:{subject}"
    response = await until_ok(http, thread + "/conversations/main/export", {"after": after})
    assert response.status_code == 200, response.text[:500]
    entries = response.json()["entries"]
    search = await until_ok(http, thread + "/search", {"q": word, "after": after})
    assert search.status_code == 200, search.text[:500]
    hits = search.json()["results"]
    assert hits, search.text[:500]
    answer_id = next(e["entry_id"] for e in entries if e["role"] == "answer")
    single = (await http.get(f"{thread}/entries/{answer_id}")).json()
    return {
        "states": {e["entry_id"].split(".", 1)[1]: e["answer_state"] for e in entries},
        "receipts": {e["entry_id"].split(".", 1)[1]: e.get("receipt") for e in entries if e["role"] != "question"},
        "hit": hits[0]["answer_state"],
        "neighbours": {n["answer_state"] for hit in hits for n in hit["neighbours"]},
        "entry": single["answer_state"],
    }


def ids() -> tuple[str, str, str]:
    return f"ann-{uuid.uuid4().hex[:8]}", str(uuid.uuid4()), f"w{uuid.uuid4().hex[:10]}"


async def test_an_answer_whose_calls_all_passed_is_verified(http: httpx.AsyncClient) -> None:
    subject, exchange_id, word = ids()
    recorded = await chest(http, subject, exchange_id, word)
    await receipt(http, subject, exchange_id, "passed", call_index=0, detail="the lid is open")
    checked = await receipt(http, subject, exchange_id, "failed_expected", call_index=1)
    after = f"{recorded},{checked}"

    exchange = await on_context(http, subject, after)
    assert exchange["answer_state"] == "verified"
    assert [c["receipt"] for c in exchange["tool_calls"]] == ["passed", "failed_expected"]

    archived = await on_archive(http, subject, word, after)
    assert archived["states"] == {"q": "verified", "t0": "verified", "t1": "verified", "a": "verified"}
    assert archived["receipts"] == {"t0": "passed", "t1": "failed_expected", "a": None}
    assert (archived["hit"], archived["neighbours"], archived["entry"]) == ("verified", {"verified"}, "verified")


async def test_an_answer_with_a_call_unchecked_or_failed_stays_unverified(http: httpx.AsyncClient) -> None:
    subject, exchange_id, word = ids()
    recorded = await chest(http, subject, exchange_id, word)
    checked = await receipt(http, subject, exchange_id, "passed", call_index=0)
    after = f"{recorded},{checked}"

    exchange = await on_context(http, subject, after)
    assert exchange["answer_state"] == "unverified"
    assert [c["receipt"] for c in exchange["tool_calls"]] == ["passed", None]
    archived = await on_archive(http, subject, word, after)
    assert set(archived["states"].values()) == {"unverified"}
    assert (archived["hit"], archived["entry"]) == ("unverified", "unverified")

    # a receipt that failed leaves it unverified too, as does the claimed action's not being run
    failed = await receipt(http, subject, exchange_id, "failed", call_index=1, detail="there were 2 keys")
    assert (await on_context(http, subject, failed))["answer_state"] == "unverified"
    assert (await on_archive(http, subject, word, failed))["receipts"]["t1"] == "failed"


async def test_an_answer_whose_call_never_answered_is_incomplete(http: httpx.AsyncClient) -> None:
    """Streamed parts: the call is sent, never its result, and the answer comes; a minute ago, past the
    API's 1 s timeout. Receipts do not make it verified: the call never answered."""
    subject, exchange_id, word = ids()
    at = now_ms() - MINUTE_MS
    route = {"tenant": "castle", "subject": subject, "occurred_at": at}
    base = f"/v1/exchanges/{exchange_id}"
    await posted(http, base + "/question", {**route, "question": f"mine the {word} ore"})
    await posted(http, base + "/tool-calls", {**route, "call_index": 0, "name": "mine", "arguments": {"ore": word}})
    answered = await posted(http, base + "/answer", {**route, "answer": f"The {word} ore is mined."})
    checked = await receipt(http, subject, exchange_id, "passed", call_index=0)
    after = f"{answered},{checked}"

    exchange = await on_context(http, subject, after)
    assert [c["status"] for c in exchange["tool_calls"]] == ["incomplete"]
    assert exchange["answer_state"] == "incomplete"
    archived = await on_archive(http, subject, word, after)
    assert archived["states"] == {"q": "incomplete", "t0.c": "incomplete", "a": "incomplete"}
    assert (archived["hit"], archived["entry"]) == ("incomplete", "incomplete")


async def test_a_late_receipt_turns_an_unverified_answer_verified(http: httpx.AsyncClient) -> None:
    subject, exchange_id, word = ids()
    recorded = await chest(http, subject, exchange_id, word)
    first = await receipt(http, subject, exchange_id, "passed", call_index=0)
    before = await receipt(http, subject, exchange_id, "not_run", call_index=1)
    assert (await on_context(http, subject, f"{recorded},{first},{before}"))["answer_state"] == "unverified"
    archived = await on_archive(http, subject, word, f"{recorded},{before}")
    assert (archived["hit"], archived["entry"], archived["receipts"]["t1"]) == ("unverified", "unverified", "not_run")

    # the check ran later, and passed: the next reads say verified, on the context and in the archive
    late = await receipt(http, subject, exchange_id, "passed", call_index=1, recorded_at=now_ms())
    exchange = await on_context(http, subject, late)
    assert exchange["answer_state"] == "verified"
    assert [c["receipt"] for c in exchange["tool_calls"]] == ["passed", "passed"]
    archived = await on_archive(http, subject, word, late)
    assert set(archived["states"].values()) == {"verified"}
    assert (archived["hit"], archived["entry"]) == ("verified", "verified")

    # a receipt for the claimed action as a whole counts too, once there is one
    action = await receipt(http, subject, exchange_id, "failed", detail="no keys in the player's inventory")
    exchange = await on_context(http, subject, action)
    assert (exchange["receipt"], exchange["answer_state"]) == ("failed", "unverified")
    assert (await on_archive(http, subject, word, action))["receipts"]["a"] == "failed"


async def test_a_receipt_is_refused_naming_what_is_wrong(http: httpx.AsyncClient) -> None:
    body = {"tenant": "castle", "subject": "ann", "agent": "allay", "exchange_id": "x1"}
    for more, field in [
        ({"result": "ok"}, "result"),
        ({"result": "passed", "call_index": -1}, "call_index"),
        ({"result": "passed", "detail": "x" * 2001}, "detail"),
        ({}, "result"),
    ]:
        response = await http.post("/v1/receipts", json={**body, **more})
        assert response.status_code == 422, response.text[:300]
        assert field in response.text
