"""The synchronous client: `MemlogClient(url, token)`; every method is one API call."""

from __future__ import annotations

import time
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


class MemlogClient:
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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._sender = Sender(base_url, token, retries, backoff)
        self._http = httpx.Client(timeout=timeout, transport=transport)

    def __enter__(self) -> MemlogClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def run(self, call: Call[T]) -> T:
        """Send one call, again where that is safe, and read its typed answer."""
        attempt = 0
        while True:
            try:
                response = self._http.send(self._sender.request(self._http, call))
            except httpx.TransportError as exc:
                time.sleep(self._sender.broken(call, exc, attempt))
                attempt += 1
                continue
            wait = self._sender.again_after(call, response, attempt)
            if wait is None:
                return self._sender.answer(call, response)
            time.sleep(wait)
            attempt += 1

    def record(self, tenant: str, subject: str, question: str, answer: str | None = None, **more: Any) -> Accepted:
        """Record a whole exchange (more: tool_calls, thread, agent, model, conversation, occurred_at,
        exchange_id, idempotency_key; a key is made when none is given)."""
        return self.run(Calls.record(tenant, subject, question, answer, **more))

    def ask(self, exchange_id: str, tenant: str, subject: str, question: str, **more: Any) -> Accepted:
        """Stream an exchange: its question first (answer and tool calls follow with the same id)."""
        return self.run(Calls.part(exchange_id, "question", tenant, subject, question=question, **more))

    def tool_call(
        self, exchange_id: str, tenant: str, subject: str, call_index: int, name: str, **more: Any
    ) -> Accepted:
        """Stream one tool call of an exchange (more: arguments, result, ok, duration_ms)."""
        fields = {"call_index": call_index, "name": name, **more}
        return self.run(Calls.part(exchange_id, "tool-calls", tenant, subject, **fields))

    def answer(self, exchange_id: str, tenant: str, subject: str, answer: str, **more: Any) -> Accepted:
        """Stream an exchange's answer: it completes the exchange."""
        return self.run(Calls.part(exchange_id, "answer", tenant, subject, answer=answer, **more))

    def context(self, tenant: str, subject: str, *, after: Position | None = None, **more: Any) -> Context:
        """The session ready for the model; `after=` a write's position waits until it is applied. An
        unchanged context is not sent again (ETag) and the copy held is returned."""
        return self.run(Calls.context(tenant, subject, after=after, **more))

    def public_context(self, tenant: str, *, after: Position | None = None, wait: float | None = None) -> Context:
        return self.run(Calls.public_context(tenant, after=after, wait=wait))

    def remember(self, tenant: str, subject: str | None, text: str, **more: Any) -> FactAccepted:
        """Save a fact of a subject (subject None: the tenant's knowledge); more: agent, scope, source."""
        return self.run(Calls.remember(tenant, subject, text, **more))

    def facts(self, tenant: str, subject: str | None, **more: Any) -> Facts:
        """List (or with q=, recall) a subject's facts or the tenant's knowledge; more: after, wait, agent, q."""
        return self.run(Calls.facts(tenant, subject, **more))

    def recall(self, tenant: str, subject: str, question: str, **more: Any) -> Facts:
        """The facts that bear on a question, best first."""
        return self.run(Calls.facts(tenant, subject, q=question, **more))

    def revise(self, tenant: str, subject: str | None, fact_id: str, text: str, **more: Any) -> FactAccepted:
        return self.run(Calls.revise(tenant, subject, fact_id, text, **more))

    def forget(self, tenant: str, subject: str | None, fact_id: str, **more: Any) -> FactAccepted:
        return self.run(Calls.forget(tenant, subject, fact_id, **more))

    def tools(self) -> list[dict[str, Any]]:
        """The agent's memory tools as function-calling definitions."""
        return self.run(Calls.tools())

    def run_tool(
        self, tenant: str, subject: str, agent: str, name: str, arguments: dict[str, Any], **more: Any
    ) -> dict[str, Any]:
        """Execute a memory tool for an agent (more: exchange_id, call_index, idempotency_key)."""
        return self.run(Calls.run_tool(tenant, subject, agent, name, arguments, **more))

    def search(self, tenant: str, thread: str, q: str, **more: Any) -> dict[str, Any]:
        return self.run(Calls.search(tenant, thread, q, **more))

    def conversations(self, tenant: str, thread: str) -> dict[str, Any]:
        return self.run(Calls.conversations(tenant, thread))

    def calendar(self, tenant: str, thread: str, **params: Any) -> dict[str, Any]:
        return self.run(Calls.calendar(tenant, thread, **params))

    def receipt(
        self, tenant: str, subject: str | None, agent: str, exchange_id: str, result: str, **more: Any
    ) -> ReceiptAccepted:
        """A tool call's (`call_index=`) or a claimed action's checked result (seed 004's receipts)."""
        return self.run(Calls.receipt(tenant, subject, agent, exchange_id, result, **more))

    def runs(self, tenant: str, **params: Any) -> Any:
        """Operators: traced runs."""
        return self.run(Calls.runs(tenant, **params))

    def erase(self, tenant: str, subject: str, *, reason: str | None = None) -> PrivacyRequest:
        """Operators: erase everything memlog holds about a subject."""
        return self.run(Calls.erase(tenant, subject, reason=reason))

    def export(self, tenant: str, subject: str) -> dict[str, Any] | PrivacyRequest:
        """Operators: the subject's bundle."""
        return self.run(Calls.export(tenant, subject))

    def ledger(self, tenant: str, **more: Any) -> LedgerPage:
        """Operators: the requests made and what they did, newest first (more: subject, limit, cursor)."""
        return self.run(Calls.ledger(tenant, **more))
