"""The context routes' shortcut (memlog/api/shortcut.py) answers exactly as the FastAPI routes do, on the
real broker and Redis with memlog's own worker: the same status, headers and bytes for reads, 304s and
refusals it serves, and every request it is not sure of left to FastAPI.

Three in-process apps share one set of services: `plain` (the FastAPI routes alone), `full` (the API as
`memlog api` serves it) and `bare` (the shortcut in front of a wall that answers 418), so a request the
shortcut serves is proven served by it, and one it leaves is proven left."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from memlog.api.shortcut import ContextShortcut
from memlog.config.settings import Settings
from tests.e2e.conftest import WALL, Apps, memlog, own_settings, shortcut_apps

TENANT = "short"
TOKENS = {"tok-short": TENANT, "tok-other": "other"}
MINE = {"Authorization": "Bearer tok-short"}


@pytest.fixture(scope="module")
def live(stack: Settings) -> Iterator[Settings]:
    with memlog(own_settings(stack, backend_tokens=TOKENS), api=False) as settings:
        yield settings


@pytest.fixture
async def apps(live: Settings) -> AsyncIterator[Apps]:
    async with shortcut_apps(live, ContextShortcut) as opened:
        yield opened


async def post(apps: Apps, path: str = "/v1/exchanges", **payload: Any) -> str:
    response = await apps.plain.post(path, json={"tenant": TENANT, **payload}, headers=MINE)
    assert response.status_code == 202, response.text
    position: str = response.json()["position"]
    return position


def answer(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    return response.status_code, sorted(response.headers.multi_items()), response.content


async def served(apps: Apps, url: str, **request: Any) -> httpx.Response:
    """Asked of the shortcut alone and of the FastAPI routes alone: the same answer."""
    shortcut, route = await apps.bare.get(url, **request), await apps.plain.get(url, **request)
    assert shortcut.status_code != WALL, f"{url} {request} was left to FastAPI"
    assert answer(shortcut) == answer(route), (url, request)
    assert answer(await apps.full.get(url, **request)) == answer(route)
    return route


async def left(apps: Apps, url: str, **request: Any) -> httpx.Response:
    """Not the shortcut's to answer: FastAPI answers it, as without the shortcut."""
    assert (await apps.bare.get(url, **request)).status_code == WALL, f"{url} {request} was served"
    route = await apps.plain.get(url, **request)
    assert answer(await apps.full.get(url, **request)) == answer(route)
    return route


async def test_reads_and_304s_are_served_as_the_routes_serve_them(apps: Apps) -> None:
    await post(apps, subject="ann", question="where is the chest?", answer="by the well")
    await post(apps, subject="ann", question="and the key?", tool_calls=[{"name": "look", "result": {"k": 1}}])
    fact = await apps.plain.post(
        f"/v1/tenants/{TENANT}/subjects/ann/facts", json={"text": "the chest is by the well"}, headers=MINE
    )
    assert fact.status_code == 202, fact.text
    await post(apps, subject="cy", thread="public", asker="Cy", question="anyone?", answer="no")
    last = await post(apps, subject="ann", agent="guide", thread="automation", question="tick?", answer="tock")
    session = f"/v1/tenants/{TENANT}/subjects/ann/context"
    first = await served(apps, session, params={"after": last, "wait": "30"}, headers=MINE)
    assert first.status_code == 200 and len(first.json()["exchanges"]) == 2
    read = await served(apps, session, params={"after": fact.json()["position"], "wait": "30"}, headers=MINE)
    tag = read.headers["etag"]
    await served(apps, session, headers={**MINE, "If-None-Match": tag})
    await served(apps, session, headers={**MINE, "If-None-Match": f'"x", W/{tag}'})
    asked = await served(
        apps, session, params={"question": "where is the chest?", "agent": "guide", "fill": "recent"}, headers=MINE
    )
    assert asked.json()["facts"], "the fact bears on the question"
    await served(apps, session, params={"question": "", "after": last, "wait": "0.5", "extra": "1"}, headers=MINE)
    public = await served(apps, f"/v1/tenants/{TENANT}/public/context", params={"after": last}, headers=MINE)
    assert public.json()["exchanges"]
    await served(apps, f"/v1/tenants/{TENANT}/agents/guide/context", params={"wait": "0"}, headers=MINE)
    await served(apps, f"/v1/tenants/{TENANT}/subjects/nobody%20yet/context", headers=MINE)


async def test_refusals_are_the_routes_refusals(apps: Apps) -> None:
    session = f"/v1/tenants/{TENANT}/subjects/ann/context"
    assert (await served(apps, session)).status_code == 401
    assert (await served(apps, session, headers={"Authorization": "Bearer nope"})).status_code == 401
    assert (await served(apps, session, headers={"Authorization": "Bearer tok-other"})).status_code == 403
    for bad in ("x" * 300, "%C3%A9%00", "%ff%7f"):
        refused = await served(apps, f"/v1/tenants/{TENANT}/subjects/{bad}/context", headers=MINE)
        assert refused.status_code == 422, refused.text
    assert (await served(apps, f"/v1/tenants/{TENANT}/agents/a%01/context", headers=MINE)).status_code == 422
    assert (await served(apps, f"/v1/tenants/{TENANT}/subjects/a:b%25%3F/context", headers=MINE)).status_code == 200
    unready = await served(apps, session, params={"after": "threads:0:999999999", "wait": "0"}, headers=MINE)
    assert unready.status_code in (422, 503), unready.text
    malformed = await served(apps, session, params={"after": "not a position"}, headers=MINE)
    assert malformed.status_code == 422, malformed.text


async def test_what_it_is_not_sure_of_is_left_to_fastapi(apps: Apps) -> None:
    session = f"/v1/tenants/{TENANT}/subjects/ann/context"
    for query in (
        "wait=-1",
        "wait=abc",
        "wait=1e3",
        "wait=nan",
        "wait=",
        "fill=all",
        "after=a&after=b",
        "wait=1&wait=2",
    ):
        refused = await left(apps, f"{session}?{query}", headers=MINE)
        assert refused.status_code in (200, 422), (query, refused.text)
    assert (await left(apps, f"{session}?wait=1e400", headers=MINE)).status_code == 422
    assert (await left(apps, session.replace("/ann/", "//"), headers=MINE)).status_code == 404
    assert (await left(apps, f"{session}/more", headers=MINE)).status_code == 404
    assert (await left(apps, f"/v1/tenants/{TENANT}/subjects/ann/agents/context", headers=MINE)).status_code == 404
    posted = await apps.bare.post(session, headers=MINE)
    assert posted.status_code == WALL
    assert answer(await apps.full.post(session, headers=MINE)) == answer(await apps.plain.post(session, headers=MINE))
