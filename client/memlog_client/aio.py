"""The asynchronous client: `AsyncMemlogClient(url, token)`; every method is one API call."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

import httpx

from memlog_client.calls import Call, Calls
from memlog_client.models import (
    Accepted,
    Context,
    FactAccepted,
    Facts,
    LedgerPage,
    Position,
    PrivacyRequest,
    ReceiptAccepted,
)
from memlog_client.transport import Sender

T = TypeVar("T")


class AsyncMemlogClient:
    """Args:
    base_url: the API, e.g. http://localhost:8000.
    token: a backend credential (bound to its tenant) or an operator's.
    timeout: seconds for each attempt.
    retries: attempts after the first, for calls safe to send again (reads, and writes with an
        idempotency key: exchanges, facts, tenant knowledge, tool runs, which the client always keys).
    backoff: first wait between attempts, doubled each time; a 503's Retry-After overrides it.
    transport: an httpx transport (tests, proxies); default httpx's own.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._sender = Sender(base_url, token, retries, backoff)
        self._http = httpx.AsyncClient(timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncMemlogClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def run(self, call: Call[T]) -> T:
        """Send one call, again where that is safe, and read its typed answer."""
        attempt = 0
        while True:
            try:
                response = await self._http.send(self._sender.request(self._http, call))
            except httpx.TransportError as exc:
                await asyncio.sleep(self._sender.broken(call, exc, attempt))
                attempt += 1
                continue
            wait = self._sender.again_after(call, response, attempt)
            if wait is None:
                return self._sender.answer(call, response)
            await asyncio.sleep(wait)
            attempt += 1

    async def record(
        self, tenant: str, subject: str, question: str, answer: str | None = None, **more: Any
    ) -> Accepted:
        """Record a whole exchange (more: tool_calls, thread, agent, model, conversation, occurred_at,
        exchange_id, idempotency_key; a key is made when none is given)."""
        return await self.run(Calls.record(tenant, subject, question, answer, **more))

    async def ask(self, exchange_id: str, tenant: str, subject: str, question: str, **more: Any) -> Accepted:
        """Stream an exchange: its question first (answer and tool calls follow with the same id)."""
        return await self.run(Calls.part(exchange_id, "question", tenant, subject, question=question, **more))

    async def tool_call(
        self, exchange_id: str, tenant: str, subject: str, call_index: int, name: str, **more: Any
    ) -> Accepted:
        """Stream one tool call of an exchange (more: arguments, result, ok, duration_ms)."""
        fields = {"call_index": call_index, "name": name, **more}
        return await self.run(Calls.part(exchange_id, "tool-calls", tenant, subject, **fields))

    async def answer(self, exchange_id: str, tenant: str, subject: str, answer: str, **more: Any) -> Accepted:
        """Stream an exchange's answer: it completes the exchange."""
        return await self.run(Calls.part(exchange_id, "answer", tenant, subject, answer=answer, **more))

    async def context(self, tenant: str, subject: str, *, after: Position | None = None, **more: Any) -> Context:
        """The session ready for the model; `after=` a write's position waits until it is applied. An
        unchanged context is not sent again (ETag) and the copy held is returned."""
        return await self.run(Calls.context(tenant, subject, after=after, **more))

    async def public_context(self, tenant: str, *, after: Position | None = None, wait: float | None = None) -> Context:
        return await self.run(Calls.public_context(tenant, after=after, wait=wait))

    async def remember(self, tenant: str, subject: str | None, text: str, **more: Any) -> FactAccepted:
        """Save a fact of a subject (subject None: the tenant's knowledge); more: agent, scope, source."""
        return await self.run(Calls.remember(tenant, subject, text, **more))

    async def facts(self, tenant: str, subject: str | None, **more: Any) -> Facts:
        """List (or with q=, recall) a subject's facts or the tenant's knowledge; more: after, wait, agent, q."""
        return await self.run(Calls.facts(tenant, subject, **more))

    async def recall(self, tenant: str, subject: str, question: str, **more: Any) -> Facts:
        """The facts that bear on a question, best first."""
        return await self.run(Calls.facts(tenant, subject, q=question, **more))

    async def revise(self, tenant: str, subject: str | None, fact_id: str, text: str, **more: Any) -> FactAccepted:
        return await self.run(Calls.revise(tenant, subject, fact_id, text, **more))

    async def forget(self, tenant: str, subject: str | None, fact_id: str, **more: Any) -> FactAccepted:
        return await self.run(Calls.forget(tenant, subject, fact_id, **more))

    async def tools(self) -> list[dict[str, Any]]:
        """The agent's memory tools as function-calling definitions."""
        return await self.run(Calls.tools())

    async def run_tool(
        self, tenant: str, subject: str, agent: str, name: str, arguments: dict[str, Any], **more: Any
    ) -> dict[str, Any]:
        """Execute a memory tool for an agent (more: exchange_id, call_index, idempotency_key)."""
        return await self.run(Calls.run_tool(tenant, subject, agent, name, arguments, **more))

    async def search(self, tenant: str, thread: str, q: str, **more: Any) -> dict[str, Any]:
        return await self.run(Calls.search(tenant, thread, q, **more))

    async def conversations(self, tenant: str, thread: str) -> dict[str, Any]:
        return await self.run(Calls.conversations(tenant, thread))

    async def calendar(self, tenant: str, thread: str, **params: Any) -> dict[str, Any]:
        return await self.run(Calls.calendar(tenant, thread, **params))

    async def receipt(
        self, tenant: str, subject: str | None, agent: str, exchange_id: str, result: str, **more: Any
    ) -> ReceiptAccepted:
        """A tool call's (`call_index=`) or a claimed action's checked result (seed 004's receipts)."""
        return await self.run(Calls.receipt(tenant, subject, agent, exchange_id, result, **more))

    async def runs(self, tenant: str, **params: Any) -> Any:
        """Operators: traced runs."""
        return await self.run(Calls.runs(tenant, **params))

    async def erase(self, tenant: str, subject: str, *, reason: str | None = None) -> PrivacyRequest:
        """Operators: erase everything memlog holds about a subject."""
        return await self.run(Calls.erase(tenant, subject, reason=reason))

    async def export(self, tenant: str, subject: str) -> dict[str, Any] | PrivacyRequest:
        """Operators: the subject's bundle."""
        return await self.run(Calls.export(tenant, subject))

    async def ledger(self, tenant: str, **more: Any) -> LedgerPage:
        """Operators: the requests made and what they did, newest first (more: subject, limit, cursor)."""
        return await self.run(Calls.ledger(tenant, **more))
