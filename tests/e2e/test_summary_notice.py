"""Loss notices end to end (seed 004, issue 17 item 3): after a fold the context says, once and at the
summary, that it is lossy, what was folded away, and the thread's search route, which finds the exact
words of a folded exchange. memlog's own worker and API processes on the local stack."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from memlog.config.settings import Settings
from schemas.events import now_ms
from tests.e2e.conftest import StartMemlog, context_of, post_exchange

TENANT = "castle-notice"
SUBJECT = "nora"
HEADER = "Summary of the earlier conversation:\n"
SECRET = "the obsidian lantern lies under the third willow"
# the SECRET sits past the bounded excerpt a fold keeps of a tool result (projections.tool_results): the summary
# keeps the call and the start of its result, never these words
FILLER = "the map's margin is full of faded notes " * 10


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    # past 6 exchanges a fold keeps the newest 2: 7 exchanges fold 5 of them
    return start_memlog(fold_exchanges=6, fold_keep_min=2, fold_keep_max=2)


async def post(http: httpx.AsyncClient, number: int) -> str:
    body: dict[str, Any] = {
        "tenant": TENANT,
        "subject": SUBJECT,
        "question": f"question {number} about the garden",
        "answer": f"answer {number}",
    }
    if number == 1:
        body["tool_calls"] = [
            {"name": "read_map", "arguments": {"page": 3}, "result": {"note": FILLER + SECRET}, "ok": True}
        ]
    position: str = (await post_exchange(http, body))["position"]
    return position


async def until_folded(http: httpx.AsyncClient, exchanges: int, wait: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + wait
    while True:
        ctx = await context_of(http, TENANT, SUBJECT)
        notice = ctx["summary_notice"]
        if (notice and notice["folded_exchanges"] >= exchanges) or time.monotonic() > deadline:
            return ctx
        await asyncio.sleep(0.2)


def check_rendered(ctx: dict[str, Any]) -> str:
    """The notice is in `rendered` exactly once, first thing under the summary's heading; its line."""
    rendered: str = ctx["rendered"]
    assert rendered.count("[Lossy ") == 1 and rendered.count("/search?q=") == 1
    assert rendered.startswith(HEADER)
    line, rest = rendered[len(HEADER) :].split("\n", 1)
    assert line.startswith("[Lossy extractive summary: ")
    assert rest.startswith(ctx["summary"] + "\n\n")
    return line


async def test_a_fold_leaves_a_notice_whose_search_finds_the_folded_words(http: httpx.AsyncClient) -> None:
    started = now_ms()
    last = ""
    for number in range(4):
        last = await post(http, number)
    unfolded = await context_of(http, TENANT, SUBJECT, last)
    assert unfolded["summary_notice"] is None and "[Lossy " not in unfolded["rendered"]
    for number in range(4, 7):
        last = await post(http, number)
    ctx = await until_folded(http, 5)
    notice = ctx["summary_notice"]
    assert notice is not None, "the session never folded"
    route = f"/v1/tenants/{TENANT}/threads/session:{SUBJECT}/search?q="
    assert notice["lossy"] is True and notice["complete"] is True
    assert (notice["summarizer"], notice["folded_exchanges"], notice["search"]) == ("extractive", 5, route)
    assert notice["folded_tokens"] > 0
    kept_at = [exchange["occurred_at"] for exchange in ctx["exchanges"]]
    assert [e["question"] for e in ctx["exchanges"]] == ["question 5 about the garden", "question 6 about the garden"]
    assert started <= notice["since"] <= notice["until"] <= min(kept_at)
    line = check_rendered(ctx)
    assert "5 earlier exchanges" in line and f"GET {route}<words>]" in line

    # the summary kept the call with an excerpt of its result, not its end; the notice's route finds the words
    assert "read_map" in ctx["summary"] and SECRET not in ctx["rendered"]
    # the session's projection shows the fold; the archive's applies it on its own (no position names
    # the fold to wait for), so the search is asked again until it has, within a bound
    deadline = time.monotonic() + 60
    while True:
        found = await http.get(notice["search"] + quote(SECRET) + "&after=" + quote(last))
        assert found.status_code == 200, found.text
        results = found.json()["results"]
        assert results and results[0]["role"] == "tool" and SECRET in results[0]["excerpt"]
        if results[0]["provenance"] == "compacted" or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert results[0]["provenance"] == "compacted"

    # a second fold: still one notice, now covering both folds
    for number in range(7, 12):
        last = await post(http, number)
    again = await until_folded(http, 10)
    assert again["summary_notice"]["folded_exchanges"] == 10, again["summary_notice"]
    assert again["summary_notice"]["since"] == notice["since"]
    assert again["summary_notice"]["until"] > notice["until"]
    assert "10 earlier exchanges" in check_rendered(again)
    assert len(again["exchanges"]) == 2


async def test_openapi_declares_the_notice(http: httpx.AsyncClient) -> None:
    schema = (await http.get("/openapi.json")).json()["components"]["schemas"]
    field = schema["Context"]["properties"]["summary_notice"]
    assert {"$ref": "#/components/schemas/SummaryNotice"} in field["anyOf"]
    assert {"lossy", "folded_exchanges", "folded_tokens", "search", "since", "until"} <= set(
        schema["SummaryNotice"]["properties"]
    )
