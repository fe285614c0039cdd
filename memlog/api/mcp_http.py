"""MCP over streamable HTTP at MCP_PATH: the credential must be bound to the path's tenant (an operator's
may serve any), and the path's subject and agent bind every tool call of the request (memlog.mcp.bound).
Stateless: each request is checked and bound on its own, so no session outlives its credential."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from memlog.api.handlers import answer_for
from memlog.app.credentials import Credentials
from memlog.app.memory import Memory, agent_names
from memlog.mcp.bound import BOUND, Binding, build_bound_mcp
from schemas.errors import MemlogError

MCP_PATH = "/v1/tenants/{tenant}/subjects/{subject}/agents/{agent}/mcp"


class McpEndpoint:
    """The ASGI endpoint: checks the credential against the path, binds, hands the request to MCP."""

    def __init__(self, state: Any, credentials: Credentials) -> None:
        self._state = state  # the app's state: its services exist once the lifespan has opened them

        def memory() -> Memory:
            opened: Memory = self._state.services.memory
            return opened

        server = build_bound_mcp(memory)
        # the API's own rules apply (credential, body size); DNS rebinding is the API's concern as a whole
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self._manager: StreamableHTTPSessionManager = server.session_manager
        self._credentials = credentials

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self._manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        params = scope.get("path_params", {})
        headers = dict(scope.get("headers", []))
        try:
            tenant, subject, agent = agent_names(params.get("tenant"), params.get("subject"), params.get("agent"))
            authorization = headers.get(b"authorization", b"").decode("latin-1") or None
            self._credentials.check(authorization, tenant)
        except MemlogError as exc:
            refusal = answer_for(exc, lambda _: "path")
            assert refusal is not None
            await refusal(scope, receive, send)
            return
        token = BOUND.set(Binding(tenant, subject, agent))
        try:
            await self._manager.handle_request(scope, receive, send)
        finally:
            BOUND.reset(token)

    def route(self) -> Route:
        return Route(MCP_PATH, endpoint=self, methods=["GET", "POST", "DELETE"], include_in_schema=False)
