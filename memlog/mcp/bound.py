"""The agent's memory tools over MCP, bound to one tenant, subject and agent by whoever opened the session
(the API's MCP endpoint: the credential names the tenant, the path the subject and the agent).

The model fills in the tools' arguments, so it never chooses whose memory it touches: the tools take no
tenant, subject or agent of their own, and one named anyway (a model imitating the stdio tools) must be
the bound one, else the call is refused and nothing is read or written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from memlog.app.memory import Memory, described
from schemas.errors import Forbidden, InvalidEvent, MemlogError


@dataclass(frozen=True)
class Binding:
    tenant: str
    subject: str
    agent: str

    def checked(self, tenant: str | None, subject: str | None, agent: str | None) -> Binding:
        """This binding, when every name the model gave is the bound one."""
        for field, given, bound in (("tenant", tenant, self.tenant), ("subject", subject, self.subject)):
            if given is not None and given != bound:
                raise Forbidden(f"this MCP session is bound to another {field}; {field} {given!r} is refused")
        if agent is not None and agent != self.agent:
            raise Forbidden(f"this MCP session is bound to another agent; agent {agent!r} is refused")
        return self


# Set by the endpoint for the request it serves; the tools run inside that request's context.
BOUND: ContextVar[Binding] = ContextVar("memlog_mcp_binding")


def bound() -> Binding:
    try:
        return BOUND.get()
    except LookupError:
        raise InvalidEvent("mcp", "this MCP server serves sessions opened through the API only") from None


NAMES = "Leave tenant, subject and agent out: the session is bound to them, and any other is refused."


def build_bound_mcp(memory: Callable[[], Memory]) -> MCPServer[Any]:
    """The tools, acting for the binding of each request (see BOUND). `memory`: the API's, once open."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        yield

    server: MCPServer[Any] = MCPServer(
        name="memlog",
        lifespan=lifespan,
        instructions="Lasting memory about the user this session serves: remember, recall, forget.",
    )

    async def run(
        name: str, arguments: dict[str, Any], names: tuple[str | None, str | None, str | None], **record: Any
    ) -> dict[str, Any]:
        try:
            binding = bound().checked(*names)
            return await memory().run_tool(binding.tenant, binding.subject, binding.agent, name, arguments, **record)
        except MemlogError as exc:  # said to the model (other exceptions are logged, and it sees only that one failed)
            raise ToolError(str(exc)) from exc

    @server.tool(description=f"{described('remember')} {NAMES}")
    async def remember(
        text: str,
        scope: str = "agent",
        exchange_id: str | None = None,
        call_index: int | None = None,
        tenant: str | None = None,
        subject: str | None = None,
        agent: str | None = None,
    ) -> dict[str, Any]:
        arguments = {"text": text, "scope": scope}
        return await run(
            "remember", arguments, (tenant, subject, agent), exchange_id=exchange_id, call_index=call_index
        )

    @server.tool(description=f"{described('recall')} {NAMES}")
    async def recall(
        query: str,
        exchange_id: str | None = None,
        call_index: int | None = None,
        tenant: str | None = None,
        subject: str | None = None,
        agent: str | None = None,
    ) -> dict[str, Any]:
        arguments = {"query": query}
        return await run("recall", arguments, (tenant, subject, agent), exchange_id=exchange_id, call_index=call_index)

    @server.tool(description=f"{described('forget')} {NAMES}")
    async def forget(
        fact_id: str,
        exchange_id: str | None = None,
        call_index: int | None = None,
        tenant: str | None = None,
        subject: str | None = None,
        agent: str | None = None,
    ) -> dict[str, Any]:
        arguments = {"fact_id": fact_id}
        return await run("forget", arguments, (tenant, subject, agent), exchange_id=exchange_id, call_index=call_index)

    return server
