"""What the privacy tests plant for a subject over HTTP, and dumps of what Redis and MongoDB then hold."""

from __future__ import annotations

import json
from typing import Any

import httpx
import redis.asyncio as aioredis

from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from schemas.events import now_ms

TENANT = "castle"

GONE, KEPT = "erin", "olaf"


def marks(subject: str) -> list[str]:
    return [f"{subject.upper()}-{part}-MARK" for part in ("QUESTION", "TOOL", "ANSWER", "PUBLIC", "FACT", "PROMPT")]


async def record_everything(http: httpx.AsyncClient, subject: str) -> list[str]:
    """An exchange with a tool call, a public question, a fact and a traced run; returns position tokens."""
    q, tool, answer, public, fact, prompt = marks(subject)
    tokens = []
    exchange = {
        "tenant": TENANT,
        "subject": subject,
        "question": f"where is my base? {q}",
        "tool_calls": [{"name": "find_base", "arguments": {"who": tool}, "result": {"x": tool}}],
        "answer": f"at 100 64 -20 {answer}",
        "idempotency_key": f"{subject}-1",
    }
    for body in (exchange, {"tenant": TENANT, "subject": subject, "thread": "public", "question": public}):
        response = await http.post("/v1/exchanges", json=body)
        assert response.status_code == 202, response.text
        tokens.append(response.json()["position"])
    response = await http.post(f"/v1/tenants/{TENANT}/subjects/{subject}/facts", json={"text": f"likes {fact}"})
    assert response.status_code == 202, response.text
    tokens.append(response.json()["position"])
    now = now_ms()
    run = {
        "tenant": TENANT,
        "subject": subject,
        "agent": "allay",
        "run_id": f"run-{subject}",
        "status": "ok",
        "started_at": now - 1000,
        "ended_at": now,
        "steps": [
            {
                "model": "m",
                "prompt": prompt,
                "output": f"out {prompt}",
                "input_tokens": 3,
                "output_tokens": 2,
                "started_at": now - 900,
                "duration_ms": 50,
            }
        ],
    }
    response = await http.post("/v1/runs", json=run)
    assert response.status_code == 202, response.text
    tokens.append(response.json()["position"])
    return tokens


async def redis_dump(settings: Settings, prefix: str) -> str:
    client = aioredis.Redis.from_url(settings.redis)
    parts = []
    try:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            kind = (await client.type(key)).decode()
            value: Any = None
            if kind == "hash":
                value = await client.hgetall(key)  # type: ignore[misc]
            elif kind == "list":
                value = await client.lrange(key, 0, -1)  # type: ignore[misc]
            elif kind == "string":
                value = await client.get(key)
            parts.append(f"{key!r} {value!r}")
    finally:
        await client.aclose()
    return "\n".join(parts)


async def mongo_dump(settings: Settings, databases: list[str]) -> str:
    mongo = mongo_client(settings.mongo)
    parts = []
    try:
        for name in databases:
            for collection in await mongo[name].list_collection_names():
                for doc in await mongo[name][collection].find({}).to_list():
                    parts.append(f"{name}.{collection} {json.dumps(doc, default=str)}")
    finally:
        await mongo.close()
    return "\n".join(parts)
