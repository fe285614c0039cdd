"""Cursors cannot be forged, on every route that pages (issue 41: tampered cursors answered 500 on 8 routes).

Two tenants hold the same kind of data. On each of the ten paging routes, a genuine cursor is taken, then
sent back changed: unsigned payloads of every shape (JSON nested 5,000 deep, 1e999, 2^70, a list or a
string where a number belongs, an empty position), truncated, with a character changed, signed for
another route, or issued to the other tenant. Every one answers 422 naming `cursor`. Then payloads of
those shapes are signed with the server's own key (a key that leaked): none answers 5xx. Across both,
no answer about one tenant carries the other's data.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from projections.archives import binding
from projections.calendar import zone
from projections.cursors import Cursors
from projections.paging import list_binding
from tests.e2e.conftest import StartMemlog

TAG = uuid.uuid4().hex[:8]
TENANTS = (f"fuzz-a-{TAG}", f"fuzz-b-{TAG}")
OPERATOR = f"op-{TAG}"
BACKENDS = {f"be-{tenant}": tenant for tenant in TENANTS}
Q = "red chest"
DAY_MS = 86_400_000

DEEP = "[" * 5000 + "]" * 5000
# values no cursor memlog issues holds, as JSON texts
ODD_VALUES = (DEEP, "1e999", "-1e999", str(2**70), str(-(2**70)), "1.5", '"x"', '""', "[]", "{}", "null", "true")
ODD_VALUES += ("NaN", "9" * 5000, '[1,"x",[2]]', '{"s":0,"p":[0]}')


def odd_payloads() -> list[str]:
    """Payload texts of every shape: each odd value alone and in each place a cursor holds a value."""
    texts: list[str] = ["{}", '{"s":0}', '{"p":[]}', '{"s":0,"p":[]}', '{"m":{},"p":[]}', "", "{"]
    for v in ODD_VALUES:
        texts += [
            v,
            f'{{"s":{v},"p":[0]}}',
            f'{{"s":0,"p":{v}}}',
            f'{{"s":0,"p":[{v}]}}',
            f'{{"s":0,"p":[{v},"r"]}}',
            f'{{"s":0,"p":["2026-01-01T00:00:00+00:00",{v}]}}',
            f'{{"s":0,"p":[{v},0,"subject","f"]}}',
            f'{{"s":0,"p":[0,0,0,{v}]}}',
            f'{{"s":0,"p":[0,0,0,"s",{v}]}}',
            f'{{"m":{{}},"p":[0,0,0,"s"],"n":{v}}}',
            f'{{"m":{v},"p":[0,0,0,"s"]}}',
            f'{{"m":{{"t:0":{v}}},"p":[0,0,0,"s"]}}',
            f'{{"m":{{}},"p":[{v},0,0,"s"]}}',
        ]
    return texts


@dataclass(frozen=True)
class Route:
    """One paging route: how to ask for a page of a tenant's data, and what its cursor is bound to."""

    name: str
    path: str  # with {tenant}
    params: dict[str, Any]
    operator: bool
    bound: Callable[[str], str]  # the binding the server computes for this request, by tenant
    tool: bool = False  # the recall tool: a POST with the cursor among its arguments

    async def page(self, http: httpx.AsyncClient, tenant: str, cursor: str | None) -> httpx.Response:
        token = OPERATOR if self.operator else f"be-{tenant}"
        headers = {"Authorization": f"Bearer {token}"}
        url = self.path.format(tenant=tenant)
        if self.tool:
            arguments = {**self.params, **({"cursor": cursor} if cursor is not None else {})}
            return await http.post(url, json={"arguments": arguments}, headers=headers)
        params = {**self.params, **({"cursor": cursor} if cursor is not None else {})}
        return await http.get(url, params=params, headers=headers)


def next_cursor(response: httpx.Response) -> str | None:
    if "Next-Cursor" in response.headers:
        return response.headers["Next-Cursor"]
    body = response.json()
    return body.get("next_cursor") if isinstance(body, dict) else None


THREAD = "/v1/tenants/{tenant}/threads/session:ann"
ROUTES = (
    Route(
        "thread search",
        THREAD + "/search",
        {"q": Q, "limit": 1},
        False,
        lambda t: binding("search", t, "session", "ann", "current", None, Q, None, None, "exchange"),
    ),
    Route(
        "calendar",
        THREAD + "/calendar",
        {},
        False,
        lambda t: binding("calendar", t, "session", "ann", "current", None, zone(None).key, None, None),
    ),
    Route(
        "export",
        THREAD + "/conversations/main/export",
        {"limit": 1},
        False,
        lambda t: binding("export", t, "session", "ann", "main", "current"),
    ),
    Route(
        "agent search",
        "/v1/tenants/{tenant}/agents/smith/search",
        {"q": Q, "limit": 1},
        False,
        lambda t: binding("across", t, "smith", "history", Q, None, None, "exchange"),
    ),
    Route(
        "tenant search",
        "/v1/tenants/{tenant}/search",
        {"q": Q, "limit": 1},
        True,
        lambda t: binding("across", t, None, "history", Q, None, None, "exchange"),
    ),
    Route(
        "subject facts",
        "/v1/tenants/{tenant}/subjects/ann/facts",
        {"q": Q, "limit": 1},
        False,
        lambda t: list_binding("facts", t, "ann", None, False, Q, [], False),
    ),
    Route(
        "tenant facts",
        "/v1/tenants/{tenant}/facts",
        {"q": Q, "limit": 1},
        False,
        lambda t: list_binding("facts", t, None, None, False, Q, [], False),
    ),
    Route(
        "recall tool",
        "/v1/tenants/{tenant}/subjects/ann/agents/smith/tools/recall",
        {"query": Q, "limit": 1},
        False,
        lambda t: list_binding("recall", t, "ann", "smith", False, Q, [], False),
        tool=True,
    ),
    Route(
        "runs",
        "/v1/tenants/{tenant}/runs",
        {"limit": 1},
        True,
        lambda t: list_binding("runs", t, None, None, None, None),
    ),
    Route("ledger", "/v1/tenants/{tenant}/ledger", {"limit": 1}, True, lambda t: list_binding("ledger", t, None)),
)


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog(backend_tokens=BACKENDS, operator_tokens=[OPERATOR])


async def _ok(response: httpx.Response, status: int = 202) -> dict[str, Any]:
    assert response.status_code == status, response.text[:500]
    body: dict[str, Any] = response.json()
    return body


async def seed(http: httpx.AsyncClient, tenant: str) -> None:
    """Enough of everything that each route has a second page: its text names the tenant."""
    backend = {"Authorization": f"Bearer be-{tenant}"}
    operator = {"Authorization": f"Bearer {OPERATOR}"}
    now = int(time.time() * 1000)
    position = ""
    for n, at in enumerate((now - 400 * DAY_MS, now - 2000, now - 1000)):
        body = {"tenant": tenant, "subject": "ann", "agent": "smith", "occurred_at": at}
        body |= {"question": f"where is the red chest {n} of {tenant}", "answer": f"the red chest of {tenant}"}
        position = (await _ok(await http.post("/v1/exchanges", json=body, headers=backend)))["position"]
    archived = {"after": position, "wait": 30}
    await _ok(await http.get(f"{THREAD.format(tenant=tenant)}/conversations", params=archived, headers=backend), 200)
    positions = []
    for n in range(3):
        for path in (f"/v1/tenants/{tenant}/subjects/ann/facts", f"/v1/tenants/{tenant}/facts"):
            saved = await http.post(path, json={"text": f"the red chest {n} of {tenant} holds gold"}, headers=backend)
            positions.append((await _ok(saved))["position"])
    applied = {"after": ",".join(positions), "wait": 30}
    await _ok(await http.get(f"/v1/tenants/{tenant}/facts", params=applied, headers=backend), 200)
    for n in range(2):
        run = {"tenant": tenant, "agent": "smith", "run_id": f"run-{n}", "status": "ok"}
        run |= {"started_at": now + n, "ended_at": now + n + 5}
        position = (await _ok(await http.post("/v1/runs", json=run, headers=backend)))["position"]
    await _ok(await http.get(f"/v1/tenants/{tenant}/runs", params={"after": position}, headers=operator), 200)
    for gone in ("gone-1", "gone-2"):
        erased = await http.post(
            f"/v1/tenants/{tenant}/subjects/{gone}/erase", json={"reason": "fuzz"}, headers=operator
        )
        assert (await _ok(erased, 200))["done"] is True


def changed(cursor: str) -> list[str]:
    """A genuine cursor truncated, with a character changed, extended, or split from its tag."""
    body, _, tag = cursor.partition(".")
    variants = [cursor[:end] for end in sorted({1, len(body) // 2, len(body), len(body) + 1, len(cursor) - 1})]
    for at in sorted({0, len(body) // 3, len(body) - 1, len(body) + 3, len(cursor) - 1}):
        variants.append(cursor[:at] + ("A" if cursor[at] != "A" else "B") + cursor[at + 1 :])
    variants += [cursor + "A", cursor + ".x", body, f"{body}.", f".{tag}", cursor.replace(".", ""), "é" + cursor]
    variants += [cursor + "A" * 40_000]
    return variants


def unsigned(text: str, n: int) -> list[str]:
    """A payload with no tag, or with one made up, in turn (an empty text is no cursor at all: left out)."""
    body = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    return [] if not body else [body] if n % 2 else [f"{body}.{'A' * 43}"]


async def asking(http: httpx.AsyncClient, route: Route, tenant: str, cursors: list[str]) -> list[httpx.Response]:
    """A page for each cursor, a few requests at a time."""
    gate = asyncio.Semaphore(6)

    async def ask(cursor: str) -> httpx.Response:
        async with gate:
            return await route.page(http, tenant, cursor)

    return await asyncio.gather(*(ask(cursor) for cursor in cursors))


@dataclass
class Tally:
    tampered: int = 0
    signed: int = 0
    signed_answers: dict[int, int] = field(default_factory=dict)


async def test_no_forged_cursor_reaches_a_decoder_or_another_tenants_data(
    http: httpx.AsyncClient, live: Settings
) -> None:
    await asyncio.gather(*(seed(http, tenant) for tenant in TENANTS))
    genuine: dict[tuple[str, str], str] = {}
    for route in ROUTES:
        for tenant in TENANTS:
            first = await route.page(http, tenant, None)
            assert first.status_code == 200, (route.name, first.text[:300])
            cursor = next_cursor(first)
            assert cursor, f"{route.name} gave {tenant} no second page"
            more = await route.page(http, tenant, cursor)
            assert more.status_code == 200, (route.name, more.text[:300])
            genuine[(route.name, tenant)] = cursor
    cursors = Cursors.derived(live.master_key_bytes())
    for route in ROUTES:  # the test binds as the server does: a signed payload below reaches the decoder
        assert cursors.open(genuine[(route.name, TENANTS[0])], route.bound(TENANTS[0])) is not None, route.name
    odd = odd_payloads()
    tally = Tally()
    for route in ROUTES:
        for tenant, other in (TENANTS, TENANTS[::-1]):
            own = genuine[(route.name, tenant)]
            foreign = [genuine[(route.name, other)]]  # the same route, the other tenant
            foreign += [genuine[(r.name, tenant)] for r in ROUTES if r.bound(tenant) != route.bound(tenant)]
            tampered = changed(own) + foreign + [u for n, text in enumerate(odd) for u in unsigned(text, n)]
            for cursor, answer in zip(tampered, await asking(http, route, tenant, tampered), strict=True):
                assert answer.status_code == 422, (route.name, cursor[:80], answer.status_code, answer.text[:300])
                assert answer.json()["detail"][0]["loc"][-1] == "cursor", (route.name, answer.text[:300])
                assert other not in answer.text
                tally.tampered += 1
            signed = [cursors.sign(route.bound(tenant), text) for text in odd]
            for text, answer in zip(odd, await asking(http, route, tenant, signed), strict=True):
                # signed with the server's key: read strictly, never a 5xx
                assert answer.status_code < 500, (route.name, text[:80], answer.text[:300])
                assert answer.status_code in (200, 422), (route.name, text[:80], answer.text[:300])
                if answer.status_code == 422:
                    assert answer.json()["detail"][0]["loc"][-1] == "cursor", (route.name, answer.text[:300])
                assert other not in answer.text, (route.name, text[:80])
                tally.signed += 1
                tally.signed_answers[answer.status_code] = tally.signed_answers.get(answer.status_code, 0) + 1
    print(
        f"cursor fuzz on {len(ROUTES)} routes x {len(TENANTS)} tenants: {tally.tampered} tampered, unsigned or "
        f"foreign -> 422 cursor; {tally.signed} signed odd payloads -> {tally.signed_answers}, 0 5xx, 0 foreign data"
    )
