"""Reads that wait for a projection: retried while it catches up, bounded."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

DEADLINE_SECONDS = 300


async def until_ok(http: httpx.AsyncClient, url: str, params: dict[str, Any]) -> httpx.Response:
    """A read after a position, retried while the (slow) projection catches up."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        response = await http.get(url, params=params)
        if response.status_code != 503 or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.5)


async def archived_questions(http: httpx.AsyncClient, tenant: str, subject: str, after: str) -> list[str]:
    url = f"/v1/tenants/{tenant}/threads/session:{subject}/conversations/main/export"
    questions: list[str] = []
    params: dict[str, Any] = {"after": after}
    while True:
        response = await until_ok(http, url, params)
        assert response.status_code == 200, response.text
        page = response.json()
        questions += [e["text"] for e in page["entries"] if e["entry_id"].endswith(".q")]
        if not page["next_cursor"]:
            return questions
        params = {"cursor": page["next_cursor"]}
