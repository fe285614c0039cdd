"""Tool results survive a fold (seed 004: "canonical tool calls and results survive condensation", against
seed 000's fold past 100 exchanges): a session folded past 100 exchanges still holds, in its context, what
a tool returned before the fold. memlog's own worker and API processes on the local stack, default policy."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from projections.tool_results import HEADING
from tests.e2e.conftest import StartMemlog, context_of, post_exchange

TENANT = "castle-chest"
SUBJECT = "ada"
CHEST = {"items": ["silver key", "moonstone", "map of the north tower"], "gold": 37}


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    settings = start_memlog()
    assert settings.fold_exchanges == 100  # seed 000's number, not one tuned for the test
    return settings


async def post(http: httpx.AsyncClient, number: int) -> str:
    body: dict[str, Any] = {
        "tenant": TENANT,
        "subject": SUBJECT,
        "question": f"turn {number}: where next?",
        "answer": f"go north, step {number}",
    }
    if number == 0:
        body["question"] = "what is in the oak chest?"
        body["tool_calls"] = [{"name": "open_chest", "arguments": {"chest": "oak"}, "result": CHEST, "ok": True}]
        body["answer"] = "some treasure"
    elif number % 10 == 5:  # other tool calls between: the oak chest's line must still be there
        body["tool_calls"] = [{"name": "weather", "arguments": {"turn": number}, "result": {"sky": "grey"}}]
    position: str = (await post_exchange(http, body))["position"]
    return position


async def test_a_tool_result_from_before_a_fold_past_100_exchanges_is_still_in_the_context(
    http: httpx.AsyncClient,
) -> None:
    last = ""
    for number in range(121):
        last = await post(http, number)
    ctx = await context_of(http, TENANT, SUBJECT, last)
    deadline = time.monotonic() + 90
    while ctx["summary_notice"] is None and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
        ctx = await context_of(http, TENANT, SUBJECT)
    notice = ctx["summary_notice"]
    assert notice is not None, "the session never folded"
    assert notice["folded_exchanges"] >= 71  # past 100 exchanges, all but the newest 30 at most
    # the exchange that opened the chest has left the session ...
    assert all(exchange["question"] != "what is in the oak chest?" for exchange in ctx["exchanges"])
    # ... and its context still answers "what was in the oak chest?": the tool, its call and its result
    summary: str = ctx["summary"]
    assert len(summary) <= 3_000
    section = summary[summary.index(HEADING) :]
    line = next(line for line in section.split("\n") if line.startswith("- open_chest("))
    assert '{"chest":"oak"}' in line and "call 0 ok" in line
    for item in ("silver key", "moonstone", "map of the north tower", '"gold":37'):
        assert item in line
    assert line in ctx["rendered"]
