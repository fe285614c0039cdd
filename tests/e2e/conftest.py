"""What every e2e module shares, stated once: the process factory (memlog's worker and API on a test's own
settings), the API client, and the exchange helper.

A module names its running memlog `live` (module scope, usually `start_memlog(**overrides)`), and the `http`
fixture below is a client of it. Modules needing processes by hand (a crash, a second API) use `memlog(...)`,
`start_worker` and `start_api` with `LOGS`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from memlog.api.app import create_api
from memlog.config.settings import Settings
from memlog.dev.processes import MemlogProcess, free_port, start_api, start_worker
from memlog.services import open_services
from schemas.events import now_ms
from streams.topics import ensure_topics
from tests.conftest import unique_settings

LOGS = Path(__file__).resolve().parents[2] / ".memlog-test" / "logs"

StartMemlog = Callable[..., Settings]


def own_settings(stack: Settings, **overrides: Any) -> Settings:
    """Settings of a test's own (topics, group, stores) with a free API port."""
    return unique_settings(stack, **{"api_port": free_port(), **overrides})


@contextmanager
def memlog(settings: Settings, *, worker: bool = True, api: bool = True) -> Iterator[Settings]:
    """memlog's worker and API on these settings' own topics, stopped (API first) when the block ends."""
    _ensure_topics(settings)
    processes: list[MemlogProcess] = []
    try:
        if worker:
            processes.append(start_worker(settings, LOGS))
        if api:
            processes.append(start_api(settings, LOGS))
        yield settings
    finally:
        for process in reversed(processes):
            process.stop()


def _ensure_topics(settings: Settings) -> None:
    """The settings' topics, from sync code or from inside an async test (on a thread of its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(ensure_topics(settings))
        return
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, ensure_topics(settings)).result()


@pytest.fixture(scope="module")
def start_memlog(stack: Settings) -> Iterator[StartMemlog]:
    """The process factory: `start_memlog(**overrides)` runs a worker and an API on settings of their own
    (`own_settings`) and returns those settings; everything it started stops when the module ends."""
    with ExitStack() as started:

        def start(*, worker: bool = True, api: bool = True, **overrides: Any) -> Settings:
            return started.enter_context(memlog(own_settings(stack, **overrides), worker=worker, api=api))

        yield start


@asynccontextmanager
async def api_client(settings: Settings, **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The one API client: the settings' API on 127.0.0.1, a 60 s timeout unless told otherwise."""
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{settings.api_port}", **{"timeout": 60, **options}
    ) as client:
        yield client


@pytest.fixture
def api_headers() -> dict[str, str]:
    """Headers every request of `http` carries: none here; a module whose API wants a credential on every
    request overrides this fixture (test_refusals)."""
    return {}


@pytest.fixture
async def http(live: Settings, api_headers: dict[str, str]) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the module's running memlog (its `live` fixture), sending `api_headers`."""
    async with api_client(live, headers=api_headers) as client:
        yield client


def exchange(tenant: str, subject: str, question: str, answer: str | None = None, **extra: Any) -> dict[str, Any]:
    """An exchange's body (without an answer when `answer` is None)."""
    body: dict[str, Any] = {"tenant": tenant, "subject": subject, "question": question, **extra}
    if answer is not None:
        body["answer"] = answer
    return body


def run_body(tenant: str, subject: str, run_id: str, *, end_ms: int | None = None, **fields: Any) -> dict[str, Any]:
    """A traced run's body (POST /v1/runs): agent "allay", status ok, ended at `end_ms` (now) 900 ms after
    it started, no steps or tool calls; `fields` add to it or replace any of these."""
    end = now_ms() if end_ms is None else end_ms
    body: dict[str, Any] = {"tenant": tenant, "subject": subject, "agent": "allay", "run_id": run_id}
    body |= {"status": "ok", "started_at": end - 900, "ended_at": end, "steps": [], "tool_calls": []}
    return body | fields


async def post_exchange(
    http: httpx.AsyncClient, body: dict[str, Any] | str, path: str = "/v1/exchanges", status: int = 202
) -> dict[str, Any]:
    """The exchange helper: POST a body (a dict, or JSON text sent as it is), assert the status (202 unless
    told), return the JSON answer."""
    content = body if isinstance(body, str) else json.dumps(body)
    response = await http.post(path, content=content, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def recorded(
    http: httpx.AsyncClient, tenant: str, subject: str, question: str, answer: str | None = None, **extra: Any
) -> str:
    """Record one exchange; its position."""
    position: str = (await post_exchange(http, exchange(tenant, subject, question, answer, **extra)))["position"]
    return position


async def context_of(
    http: httpx.AsyncClient, tenant: str, subject: str, after: str | None = None, **params: Any
) -> dict[str, Any]:
    """A subject's context read (once `after` is applied, when given), asserting 200; its JSON."""
    query = {**({"after": after} if after else {}), **params}
    response = await http.get(f"/v1/tenants/{tenant}/subjects/{subject}/context", params=query)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def replayed(
    http: httpx.AsyncClient,
    body: dict[str, Any],
    *,
    meanwhile: Callable[[], Awaitable[None]] | None = None,
    pause: float = 0.5,
    tries: int = 600,
    refused: bool = False,
) -> dict[str, Any]:
    """A replay started through the operator API (`body` of POST /v1/replays, asserted 202; with `refused`
    a 409 is returned as the state "refused"), followed until it is no longer running (at most `tries`
    looks `pause` apart, `meanwhile` awaited at each while it runs); its last status."""
    started = await http.post("/v1/replays", json=body)
    if refused and started.status_code == 409:
        return {"state": "refused", "detail": started.text}
    assert started.status_code == 202, started.text
    status: dict[str, Any] = {}
    for _ in range(tries):
        status = (await http.get(f"/v1/replays/{started.json()['replay_id']}")).json()
        if status["state"] != "running":
            break
        if meanwhile is not None:
            await meanwhile()
        await asyncio.sleep(pause)
    return status


WALL = 418  # what the wall behind a bare shortcut answers: a request it leaves to FastAPI


class Apps:
    """Clients of three in-process apps on one set of services, to prove a shortcut's answers the routes':
    `plain` (the FastAPI routes alone), `full` (the API as `memlog api` serves it) and `bare` (the shortcut
    in front of a wall that answers WALL)."""

    def __init__(self, plain: httpx.AsyncClient, full: httpx.AsyncClient, bare: httpx.AsyncClient) -> None:
        self.plain, self.full, self.bare = plain, full, bare


@asynccontextmanager
async def shortcut_apps(live: Settings, shortcut_of: Callable[[ASGIApp], ASGIApp]) -> AsyncIterator[Apps]:
    """`Apps` for the shortcut middleware `shortcut_of` (its class) on `live`'s stores."""
    plain, full = create_api(live), create_api(live)
    plain.user_middleware = [m for m in plain.user_middleware if m.cls is not shortcut_of]
    assert len(plain.user_middleware) == len(full.user_middleware) - 1

    async def wall(scope: Scope, receive: Receive, send: Send) -> None:
        await PlainTextResponse("left to FastAPI", status_code=WALL)(scope, receive, send)

    shortcut = shortcut_of(wall)

    async def bare(scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = plain  # where the shortcut finds the services and credentials, as in the app
        await shortcut(scope, receive, send)

    async with open_services(live, producer=True) as services:
        plain.state.services = full.state.services = services
        clients = [
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api", timeout=60)
            for app in (plain, full, bare)
        ]
        try:
            yield Apps(*clients)
        finally:
            for client in clients:
                await client.aclose()
