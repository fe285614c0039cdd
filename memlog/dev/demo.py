"""`memlog demo`: a newcomer's tour of a running memlog, driven through its HTTP API.

A subject asks and tools answer; the session folds; the agent remembers a fact and recalls it the
next day; a run is traced and its shape shown; the subject is erased; a replay of every topic
shows that they stay erased. Each step prints what happened.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from memlog.config.settings import Settings
from schemas.errors import MemlogError
from schemas.events import now_ms


class DemoFailed(MemlogError):
    """A step of the tour did not show what it should; the message says which."""


class Tour:
    def __init__(self, http: httpx.AsyncClient, tenant: str, subject: str, say: Callable[[str], None]) -> None:
        self.http = http
        self.tenant = tenant
        self.subject = subject
        self.say = say

    async def call(self, method: str, url: str, **kwargs: Any) -> Any:
        response = await self.http.request(method, url, **kwargs)
        if response.status_code >= 400:
            raise DemoFailed(f"{method} {url} answered {response.status_code}: {response.text[:300]}")
        return response.json()

    async def context(self, after: str | None = None, **params: Any) -> dict[str, Any]:
        if after is not None:
            params.update(after=after, wait=30)
        url = f"/v1/tenants/{self.tenant}/subjects/{self.subject}/context"
        result: dict[str, Any] = await self.call("GET", url, params=params)
        return result

    def check(self, ok: bool, problem: str) -> None:
        if not ok:
            raise DemoFailed(problem)


async def run_demo(settings: Settings, url: str | None = None, say: Callable[[str], None] = print) -> None:
    base = url or f"http://{settings.api_host}:{settings.api_port}"
    headers = {"Authorization": f"Bearer {settings.operator_tokens[0]}"} if settings.operator_tokens else {}
    tenant = f"demo-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
        tour = Tour(http, tenant, "steve", say)
        say(f"memlog demo against {base}, tenant {tenant}, subject steve\n")
        await ask_with_tools(tour)
        await fold(tour)
        await remember_and_recall(tour)
        await trace(tour)
        await erase_and_replay(tour)
    say("\nThe tour ran to the end.")


async def ask_with_tools(tour: Tour) -> None:
    tour.say("1. steve asks; the agent calls a tool, and answers")
    recorded = await tour.call(
        "POST",
        "/v1/exchanges",
        json={
            "tenant": tour.tenant,
            "subject": tour.subject,
            "question": "How many diamonds are in my chest?",
            "tool_calls": [{"name": "open_chest", "arguments": {"chest": "base"}, "result": {"diamond": 12}}],
            "answer": "Your chest holds 12 diamonds.",
        },
    )
    context = await tour.context(recorded["position"])
    exchange = context["exchanges"][-1]
    tour.check(exchange["tool_calls"][0]["result"] == {"diamond": 12}, "the tool result is not in the context")
    tour.say(f"   recorded at {recorded['position']}; the context now reads:")
    for line in context["rendered"].strip().splitlines():
        tour.say(f"     | {line}")


async def fold(tour: Tour) -> None:
    tour.say("\n2. the session grows past 100 exchanges and folds into a summary")
    position = ""
    for number in range(100):
        recorded = await tour.call(
            "POST",
            "/v1/exchanges",
            json={
                "tenant": tour.tenant,
                "subject": tour.subject,
                "question": f"Note {number}: what is at waypoint {number}?",
                "answer": f"Waypoint {number} is a {('farm', 'mine', 'tower')[number % 3]}.",
            },
        )
        position = recorded["position"]
    context = await tour.context(position)
    deadline = time.monotonic() + 60
    while not context["summary"] and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        context = await tour.context()
    tour.check(bool(context["summary"]), "no fold happened within 60 s; is `memlog worker` running?")
    tour.say(f"   {len(context['exchanges'])} exchanges stay whole; the rest became a summary of ")
    tour.say(f"   {len(context['summary'])} characters, starting: {context['summary'][:100]!r}")


async def remember_and_recall(tour: Tour) -> None:
    tour.say("\n3. the agent remembers a fact, and recalls it the next day")
    ran = await tour.call(
        "POST",
        f"/v1/tenants/{tour.tenant}/subjects/{tour.subject}/agents/allay/tools/remember",
        json={"arguments": {"text": "Steve's base is at 100 64 -20", "scope": "shared"}},
    )
    tour.say(f"   remember -> fact {ran['fact_id']} saved")
    # The next day the 24-hour session is gone; a reset ends it the same way, and the fact stays.
    reset = await tour.call("POST", f"/v1/tenants/{tour.tenant}/subjects/{tour.subject}/reset", json={})
    asked = await tour.call(
        "POST",
        "/v1/exchanges",
        json={"tenant": tour.tenant, "subject": tour.subject, "question": "Where is my base again?"},
    )
    after = f"{reset['position']},{asked['position']},{ran['position']}"
    context = await tour.context(after, question="Where is my base again?", agent="allay")
    tour.check(len(context["exchanges"]) == 1 and not context["summary"], "the new session is not fresh")
    texts = [fact["text"] for fact in context["facts"]]
    tour.check(any("100 64 -20" in text for text in texts), f"the fact was not recalled: {texts}")
    tour.say(f"   in a new session (as the next day), 'Where is my base again?' recalls: {texts}")


async def trace(tour: Tour) -> None:
    tour.say("\n4. a run is traced; operators see its shape, never its prompts")
    now = now_ms()
    run = {
        "tenant": tour.tenant,
        "subject": tour.subject,
        "agent": "allay",
        "status": "ok",
        "started_at": now - 2000,
        "ended_at": now,
        "steps": [
            {
                "model": "small-1",
                "prompt": "Where is my base? (private prompt text)",
                "output": "call find_base",
                "input_tokens": 40,
                "output_tokens": 6,
                "started_at": now - 2000,
                "duration_ms": 700,
            }
        ],
        "tool_calls": [
            {
                "name": "find_base",
                "arguments": {"player": "steve", "api_key": "sk-demo-secret-000000000000"},
                "result": {"x": 100},
                "ok": True,
                "started_at": now - 1200,
                "duration_ms": 40,
            }
        ],
    }
    traced = await tour.call("POST", "/v1/runs", json=run)
    shape = await tour.call(
        "GET", f"/v1/tenants/{tour.tenant}/runs/{traced['run_id']}", params={"after": traced["position"]}
    )
    tour.check("private prompt text" not in str(shape), "the shape shows a prompt")
    tour.check("sk-demo-secret" not in str(shape), "the shape shows a secret")
    tour.say(
        f"   run {traced['run_id']}: status {shape['status']}, {shape['duration_ms']} ms, models {shape['models']}, "
        f"tools {shape['tools']}, tokens {shape['input_tokens']} in / {shape['output_tokens']} out"
    )
    for item in shape["timeline"]:
        tour.say(f"     {item['kind']:5} {item['name']:10} ok={item['ok']} {item['duration_ms']} ms")


async def applied(tour: Tour, request_id: str, seconds: float = 120.0) -> dict[str, Any]:
    """The ledger's entry of an erasure the worker had not applied within the request's own wait (a busy
    worker): an operator asks the ledger later, and so does the tour."""
    tour.say("   not applied within the request's wait: following the ledger")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        page = await tour.call("GET", f"/v1/tenants/{tour.tenant}/ledger", params={"subject": tour.subject})
        for entry in page:
            if entry["id"] == request_id:
                return dict(entry)
        await asyncio.sleep(0.5)
    raise DemoFailed(f"the worker did not apply the erasure {request_id} within {seconds:.0f} s")


async def erase_and_replay(tour: Tour) -> None:
    tour.say("\n5. steve is erased; a replay of every topic shows he stays erased")
    erased = await tour.call("POST", f"/v1/tenants/{tour.tenant}/subjects/{tour.subject}/erase")
    entry = erased["ledger"] if erased["done"] else await applied(tour, erased["request_id"])
    tour.say(f"   deleted: {entry['deleted']}")
    context = await tour.context()
    tour.check(not context["exchanges"] and not context["facts"], "something of steve is still in the context")
    started = await tour.call("POST", "/v1/replays", json={"projection": "all", "switch": True})
    status: dict[str, Any] = {}
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        status = await tour.call("GET", f"/v1/replays/{started['replay_id']}")
        if status["state"] != "running":
            break
        tour.say(f"   replaying: {status.get('events', 0):,} of {status.get('total') or '?'} events")
        await asyncio.sleep(2.0)
    tour.check(status.get("state") == "done", f"the replay did not finish: {status}")
    tour.say(
        f"   rebuilt {status['events']:,} events into namespace {status['namespace']} in {status['seconds']}s; "
        f"skipped {status['skipped_events']} events: {'; '.join(status['skipped_because']) or 'none'}"
    )
    for _ in range(50):  # reads follow the switch within a second or so
        context = await tour.context()
        await asyncio.sleep(0.2)
    tour.check(not context["exchanges"] and not context["facts"], "the replay brought steve back")
    tour.say("   steve's context in the rebuilt namespace is empty: nothing came back")
