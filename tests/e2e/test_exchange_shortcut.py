"""POST /v1/exchanges the short way (memlog/api/exchange_shortcut.py) answers as the FastAPI route does, on
the real broker and Redis with memlog's own worker: the same status, headers and answer for exchanges
it records and refusals it makes, and every request it is not sure of left to FastAPI.

Three in-process apps share one set of services: `plain` (the FastAPI route alone), `full` (the API as
`memlog api` serves it) and `bare` (the shortcut in front of a wall that answers 418), so a request the
shortcut serves is proven served by it, and one it leaves is proven left."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from memlog.api.exchange_shortcut import ExchangeShortcut
from memlog.config.settings import Settings
from tests.e2e.conftest import WALL, Apps, memlog, own_settings, shortcut_apps

TENANT = "shortpost"
TOKENS = {"tok-short": TENANT, "tok-other": "other"}
MINE = {"Authorization": "Bearer tok-short"}
URL = "/v1/exchanges"


@pytest.fixture(scope="module")
def live(stack: Settings) -> Iterator[Settings]:
    with memlog(own_settings(stack, backend_tokens=TOKENS), api=False) as settings:
        yield settings


@pytest.fixture
async def apps(live: Settings) -> AsyncIterator[Apps]:
    async with shortcut_apps(live, ExchangeShortcut) as opened:
        yield opened


def answer(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    return response.status_code, sorted(response.headers.multi_items()), response.content


def accepted_shape(response: httpx.Response) -> tuple[int, list[tuple[str, str]], list[tuple[str, type]]]:
    """An acceptance without what differs from one exchange to the next (its position, its id's length)."""
    headers = sorted((k, v) for k, v in response.headers.multi_items() if k != "content-length")
    return response.status_code, headers, [(key, type(value)) for key, value in response.json().items()]


async def recorded(apps: Apps, **payload: Any) -> list[httpx.Response]:
    """Posted to the shortcut alone, the route alone and the whole API: accepted alike, each readable."""
    body = {"tenant": TENANT, **payload}
    answers = [await client.post(URL, json=body, headers=MINE) for client in (apps.bare, apps.plain, apps.full)]
    assert all(a.status_code == 202 for a in answers), [a.text for a in answers]
    assert accepted_shape(answers[0]) == accepted_shape(answers[1]) == accepted_shape(answers[2])
    assert answers[0].json()["idempotent"] is False
    return answers


async def refused(apps: Apps, payload: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    """Refused by the shortcut exactly as by the route and by the whole API."""
    shortcut = await apps.bare.post(URL, json=payload, headers=headers)
    route = await apps.plain.post(URL, json=payload, headers=headers)
    assert shortcut.status_code != WALL, f"{payload} was left to FastAPI"
    assert answer(shortcut) == answer(route), payload
    assert answer(await apps.full.post(URL, json=payload, headers=headers)) == answer(route)
    return route


async def left(apps: Apps, **request: Any) -> httpx.Response:
    """Not the shortcut's to answer: FastAPI answers it, as without the shortcut."""
    assert (await apps.bare.post(URL, **request)).status_code == WALL, f"{request} was served"
    route = await apps.plain.post(URL, **request)
    full = await apps.full.post(URL, **request)
    assert full.status_code == route.status_code, (full.text, route.text)
    return route


async def test_exchanges_are_recorded_as_the_route_records_them(apps: Apps) -> None:
    answers = await recorded(apps, subject="ann", question="where is the chest?", answer="by the well")
    await recorded(apps, subject="ann", question="and the key?", tool_calls=[{"name": "look", "result": {"k": 1}}])
    await recorded(apps, subject="cy", thread="public", asker="Cy", question="anyone?", answer="no")
    await recorded(apps, subject="ann", agent="guide", thread="automation", question="tick?", answer="tock")
    own = await recorded(
        apps, subject="bo", question="é \\u0000 ☃?", exchange_id="mine-1", occurred_at=1_700_000_000_000
    )
    assert [a.json()["exchange_id"] for a in own] == ["mine-1"] * 3
    context = await apps.plain.get(
        f"/v1/tenants/{TENANT}/subjects/ann/context",
        params={"after": answers[0].json()["position"], "wait": "30"},
        headers=MINE,
    )
    questions = [e["question"] for e in context.json()["exchanges"]]
    assert questions.count("where is the chest?") == 3, "each of the three was recorded, the shortcut's too"


async def test_refusals_are_the_routes_refusals(apps: Apps) -> None:
    exchange = {"tenant": TENANT, "subject": "ann", "question": "q?", "answer": "a"}
    assert (await refused(apps, exchange, {})).status_code == 401
    assert (await refused(apps, exchange, {"Authorization": "Bearer nope"})).status_code == 401
    assert (await refused(apps, exchange, {"Authorization": "Bearer tok-other"})).status_code == 403
    for bad in ({"subject": "x" * 300}, {"subject": "a\u0001b"}, {"thread": "automation"}, {"agent": ""}):
        assert (await refused(apps, {**exchange, **bad}, MINE)).status_code == 422, bad


async def test_what_it_is_not_sure_of_is_left_to_fastapi(apps: Apps) -> None:
    exchange = {"tenant": TENANT, "subject": "ann", "question": "q?", "answer": "a"}
    kept = await left(apps, json=exchange, headers={**MINE, "Idempotency-Key": "k-1"})
    assert kept.status_code == 202
    assert (await left(apps, json=exchange, headers=MINE, params={"x": "1"})).status_code == 202
    for bad in ({"question": 3}, {"thread": "elsewhere"}, {"occurred_at": -1}, {"tool_calls": "none"}):
        assert (await left(apps, json={**exchange, **bad}, headers=MINE)).status_code == 422, bad
    assert (await left(apps, json=[exchange], headers=MINE)).status_code == 422
    assert (
        await left(apps, content=b"{not json", headers={**MINE, "Content-Type": "application/json"})
    ).status_code == 422
    assert (await left(apps, content=b"{}", headers={**MINE, "Content-Type": "text/plain"})).status_code == 422
    assert (await apps.bare.get(URL, headers=MINE)).status_code == WALL
