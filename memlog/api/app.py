"""The ASGI app: its lifespan opens the services; handlers and routers do the rest."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from memlog.api import handlers
from memlog.api.exchange_shortcut import ExchangeShortcut
from memlog.api.guard import RequestGuard
from memlog.api.mcp_http import McpEndpoint
from memlog.api.openapi import describe_names
from memlog.api.routers import context, conversations, exchanges, facts, health, knowledge, privacy, replays, runs
from memlog.api.shortcut import ContextShortcut
from memlog.api.telemetry import HttpMetrics
from memlog.app.credentials import Credentials
from memlog.config.settings import Settings
from memlog.services import Services, open_services
from schemas.errors import ServiceSetupError, StoreUnavailable
from streams.metrics import Metrics

log = logging.getLogger(__name__)
ROUTERS = (health, exchanges, context, facts, knowledge, runs, privacy, replays, conversations)
POINTER_SECONDS = 1.0  # how soon reads follow a replay's switch to its rebuilt namespace


def create_api(settings: Settings) -> FastAPI:
    """The ASGI app. Clients are opened in its lifespan, never at import."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_services(settings, producer=True, metrics=metrics, log_positions=True) as services:
            # a summarizer or embedder set up wrongly stops the API at start, not at the first fold or recall
            services.summarizer  # noqa: B018
            services.embedder  # noqa: B018
            app.state.services = services
            for prepare in (services.shared.prepare, services.current.prepare):
                try:
                    await prepare()
                except StoreUnavailable as exc:
                    log.warning("stores not prepared yet: %s", exc)
            follower = asyncio.create_task(_follow_namespace(services))
            log.info("memlog API listening on http://%s:%d", settings.api_host, settings.api_port)
            try:
                async with mcp.running():
                    yield
            finally:
                follower.cancel()

    credentials = Credentials.from_settings(settings)
    refuse_open_listening(settings, credentials)
    metrics = Metrics()
    app = FastAPI(
        title="memlog", version="0.1.0", lifespan=lifespan, description="Event-sourced memory for AI agent backends."
    )
    app.state.credentials = credentials
    describe = app.openapi

    def openapi() -> dict[str, Any]:
        return app.openapi_schema or describe_names(describe())

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(ContextShortcut)  # inside the guard: sizes and credentials are checked first
    app.add_middleware(ExchangeShortcut)  # inside the guard too
    app.add_middleware(RequestGuard, credentials=credentials, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(HttpMetrics, router_app=app, metrics=metrics)  # outermost: refusals are counted too
    handlers.install(app)
    for area in ROUTERS:
        app.include_router(area.router)
    mcp = McpEndpoint(app.state, credentials)  # the agent's tools over MCP, bound by credential and path
    app.router.routes.append(mcp.route())
    return app


def refuse_open_listening(settings: Settings, credentials: Credentials) -> None:
    """Secure by default: an API with no credential listens on loopback only, unless told otherwise."""
    if credentials.enabled or settings.api_allow_open or is_loopback(settings.api_host):
        return
    raise ServiceSetupError(
        f"MEMLOG_API_HOST={settings.api_host} is not a loopback address and no credential is configured: "
        "set MEMLOG_CREDENTIALS_FILE (or MEMLOG_BACKEND_TOKENS / MEMLOG_OPERATOR_TOKENS), or set "
        "MEMLOG_API_ALLOW_OPEN=true to serve every tenant's memory to anyone who can reach it"
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


async def _follow_namespace(services: Services) -> None:
    """Reads follow the namespace pointer: a finished replay moves them to the rebuilt namespace."""
    while True:
        try:
            if await services.follow_pointer():
                log.warning("reads switched to namespace %s", services.current.namespace)
        except StoreUnavailable as exc:
            log.warning("namespace pointer unreadable: %s", exc)
        await asyncio.sleep(POINTER_SECONDS)
