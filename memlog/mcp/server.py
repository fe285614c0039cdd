"""`memlog mcp`: the agent's memory tools (remember, recall, forget) as an MCP server on stdio.

One server per agent identity (`--agent`); every tool names the tenant and the subject, so one
agent runtime can serve many players. Calls go through the same Memory as the HTTP API and CLI.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer

from memlog.app.memory import Memory, described
from memlog.config.settings import Settings
from memlog.services import open_services


class _Opened:
    """The services, opened on the first call inside the server's event loop, closed at its end."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.memory: Memory | None = None
        self._lock = asyncio.Lock()
        self._stack = AsyncExitStack()

    async def get(self) -> Memory:
        async with self._lock:
            if self.memory is None:
                services = await self._stack.enter_async_context(
                    open_services(self.settings, producer=True, producer_name=f"mcp:{self.settings.producer_name}")
                )
                self.memory = services.memory
            return self.memory

    async def close(self) -> None:
        await self._stack.aclose()


def build_mcp(settings: Settings, agent: str) -> MCPServer[Any]:
    opened = _Opened(settings)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await opened.close()

    server: MCPServer[Any] = MCPServer(
        name="memlog", lifespan=lifespan, instructions="Lasting memory about the user: remember, recall, forget."
    )

    @server.tool(description=described("remember"))
    async def remember(
        tenant: str,
        subject: str,
        text: str,
        scope: str = "agent",
        exchange_id: str | None = None,
        call_index: int | None = None,
    ) -> dict[str, Any]:
        return await (await opened.get()).run_tool(
            tenant,
            subject,
            agent,
            "remember",
            {"text": text, "scope": scope},
            exchange_id=exchange_id,
            call_index=call_index,
        )

    @server.tool(description=described("recall"))
    async def recall(
        tenant: str, subject: str, query: str, exchange_id: str | None = None, call_index: int | None = None
    ) -> dict[str, Any]:
        return await (await opened.get()).run_tool(
            tenant, subject, agent, "recall", {"query": query}, exchange_id=exchange_id, call_index=call_index
        )

    @server.tool(description=described("forget"))
    async def forget(
        tenant: str, subject: str, fact_id: str, exchange_id: str | None = None, call_index: int | None = None
    ) -> dict[str, Any]:
        return await (await opened.get()).run_tool(
            tenant, subject, agent, "forget", {"fact_id": fact_id}, exchange_id=exchange_id, call_index=call_index
        )

    return server


def run_mcp(settings: Settings, agent: str) -> None:
    build_mcp(settings, agent).run("stdio")
