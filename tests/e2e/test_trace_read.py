"""A whole trace for developers (seed 000: "a developer tool reads them"): operators only, redacted, ledgered,
and shown by the trace page to a viewer holding an operator token. memlog's own processes on the local stack."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from schemas.events import now_ms
from tests.e2e.conftest import StartMemlog
from tests.unit.secret_corpus import PLAIN, SHAPED, carried

TENANT = "castle-trace"
BACKEND = {"Authorization": "Bearer tok-castle"}
OPERATOR = {"Authorization": "Bearer tok-dev"}
PROMPT = "DEVELOPER-SEES-THIS-PROMPT"


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog(
        backend_tokens={"tok-castle": TENANT},
        operator_tokens=["tok-dev"],
        read_wait_seconds=60,  # the first read may come before the new worker has joined its group (a busy CI)
    )


def secret_run(run_id: str) -> dict[str, Any]:
    """A run whose every prompt, output, argument and result carries secrets of the redaction corpus."""
    shaped = [secret.value for secret in SHAPED]
    plain = [carried(template, secret.value) for secret in PLAIN for template in ("password={s}",)]
    end = now_ms()
    steps = [
        {
            "model": "large-2",
            "prompt": f"{PROMPT} {i}: " + " ; ".join(shaped[i::4]),
            "output": "answer with " + " ; ".join(plain[i::4]),
            "input_tokens": 10,
            "output_tokens": 5,
            "started_at": end - 4000 + i * 1000,
            "duration_ms": 500,
        }
        for i in range(4)
    ]
    calls = [
        {
            "name": "lookup",
            "arguments": {"q": f"ARGUMENT-{i}", "password": PLAIN[i].value, "free": shaped[i]},
            "result": {"rows": [f"RESULT-{i}", *shaped[i::3]], "api_key": PLAIN[-1 - i].value},
            "ok": True,
            "started_at": end - 3500 + i * 1000,
            "duration_ms": 200,
        }
        for i in range(3)
    ]
    return {
        "tenant": TENANT,
        "subject": "steve",
        "agent": "allay",
        "run_id": run_id,
        "status": "ok",
        "started_at": end - 5000,
        "ended_at": end,
        "steps": steps,
        "tool_calls": calls,
    }


def leaks(text: str) -> list[str]:
    """The corpus secrets found in `text`. A secret of digits alone (a CVV, "837") counts only as a number
    of its own: found by chance inside a timestamp's digits, it is no leak (it failed CI once so)."""
    return [
        secret.name
        for secret in (*SHAPED, *PLAIN)
        if (re.search(rf"(?<!\d){secret.value}(?!\d)", text) if secret.value.isdigit() else secret.value in text)
    ]


async def traced(http: httpx.AsyncClient, run_id: str) -> str:
    response = await http.post("/v1/runs", json=secret_run(run_id), headers=BACKEND)
    assert response.status_code == 202, response.text[:500]
    position: str = response.json()["position"]
    return position


async def trace_reads(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await http.get(f"/v1/tenants/{TENANT}/ledger", headers=OPERATOR, params={"limit": 500})
    assert response.status_code == 200, response.text
    return [entry for entry in response.json() if entry["kind"] == "trace-read"]


async def test_the_whole_trace_is_for_operators_redacted_and_ledgered(http: httpx.AsyncClient) -> None:
    position = await traced(http, "run-whole")
    route = f"/v1/tenants/{TENANT}/runs/run-whole/trace"
    before = await trace_reads(http)

    assert (await http.get(route, params={"after": position}, headers=BACKEND)).status_code == 403
    assert (await http.get(route, params={"after": position})).status_code == 401
    response = await http.get(route, params={"after": position}, headers=OPERATOR)
    assert response.status_code == 200, response.text[:500]
    whole = response.json()

    # the whole run: prompts, outputs, arguments and results, in their order
    assert [step["prompt"].split(":")[0] for step in whole["steps"]] == [f"{PROMPT} {i}" for i in range(4)]
    assert [call["arguments"]["q"] for call in whole["tool_calls"]] == ["ARGUMENT-0", "ARGUMENT-1", "ARGUMENT-2"]
    assert whole["tool_calls"][0]["result"]["rows"][0] == "RESULT-0"
    assert whole["tool_calls"][0]["arguments"]["password"] == "[REDACTED]"
    # redacted: no secret of the corpus is anywhere in it
    assert leaks(response.text) == [] and leaks(json.dumps(whole)) == []

    # ledgered: one entry per read, naming the run and who read it; refused reads leave none
    after = await trace_reads(http)
    assert len(after) == len(before) + 1
    assert after[0]["run_id"] == "run-whole" and after[0]["requested_by"]
    assert (await http.get(route, headers=OPERATOR)).status_code == 200
    assert len(await trace_reads(http)) == len(before) + 2


async def test_an_unknown_run_has_no_trace_and_no_read(http: httpx.AsyncClient) -> None:
    before = await trace_reads(http)
    response = await http.get(f"/v1/tenants/{TENANT}/runs/no-such-run/trace", headers=OPERATOR)
    assert response.status_code == 404 and "no trace of run" in response.text
    assert len(await trace_reads(http)) == len(before)


async def test_the_trace_page_shows_the_whole_run_to_an_operator(http: httpx.AsyncClient, live: Settings) -> None:
    from playwright.async_api import async_playwright

    position = await traced(http, "run-page-whole")
    shape = await http.get(f"/v1/tenants/{TENANT}/runs/run-page-whole", params={"after": position}, headers=OPERATOR)
    assert shape.status_code == 200
    url = f"http://127.0.0.1:{live.api_port}/admin/traces?tenant={TENANT}"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        try:
            page = await browser.new_page()
            await page.goto(url)
            await page.fill("input[name=token]", "tok-dev")
            await page.click("button[type=submit]")
            await page.wait_for_selector("tr.run[data-run='run-page-whole']")
            await page.click("tr.run[data-run='run-page-whole']")
            await page.wait_for_selector("body[data-timeline='7']")
            await page.click("#show-whole")
            await page.wait_for_selector("body[data-whole='7']")
            text = await page.inner_text("#whole")
            html = await page.content()
        finally:
            await browser.close()
    assert f"{PROMPT} 0" in text and "ARGUMENT-2" in text and "RESULT-1" in text
    assert leaks(html) == []
