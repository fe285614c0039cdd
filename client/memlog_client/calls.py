"""Each API call as a value (method, path, query, body, whether a retry is safe, how its answer reads),
built once here and sent by either client; and the retry rule both follow."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

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

T = TypeVar("T")
IDEMPOTENCY_HEADER = "Idempotency-Key"
RETRY_STATUSES = frozenset({503})
LONGEST_WAIT_SECONDS = 30.0  # a Retry-After longer than this is cut to it


def new_key() -> str:
    return uuid.uuid4().hex


def seg(name: str) -> str:
    """One path segment: a name with a slash or a space stays one segment."""
    return quote(name, safe="")


def _query(**params: Any) -> dict[str, Any]:
    return {name: value for name, value in params.items() if value is not None}


def _body(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request. `safe`: sending it again cannot apply it twice (a read, or a write with an
    idempotency key), so it is retried after a broken connection and a 503; otherwise only when the
    connection failed before anything was sent."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, Any] = field(default_factory=dict)
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    safe: bool = False
    etag: bool = False  # a context read: the client sends If-None-Match and reuses its copy on 304


def retry_delay(attempt: int, retry_after: str | None, backoff: float) -> float:
    """Seconds before attempt `attempt + 1`: the API's Retry-After when it sent one (cut to
    LONGEST_WAIT_SECONDS), else exponential from `backoff`."""
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), LONGEST_WAIT_SECONDS)
        except ValueError:
            pass
    return float(min(backoff * 2**attempt, LONGEST_WAIT_SECONDS))


def _model(kind: type[T]) -> Callable[[httpx.Response], T]:
    def read(response: httpx.Response) -> T:
        return kind.model_validate(response.json())  # type: ignore[attr-defined, no-any-return]

    return read


def _json(response: httpx.Response) -> Any:
    return response.json()


def _ledger(response: httpx.Response) -> LedgerPage:
    return LedgerPage(entries=response.json(), next_cursor=response.headers.get("Next-Cursor"))


def _export(response: httpx.Response) -> dict[str, Any] | PrivacyRequest:
    body = response.json()
    return PrivacyRequest.model_validate(body) if response.status_code == 202 else body


def subject_path(tenant: str, subject: str) -> str:
    return f"/v1/tenants/{seg(tenant)}/subjects/{seg(subject)}"


class Calls:
    """The API's calls, named as a backend thinks of them."""

    @staticmethod
    def record(
        tenant: str,
        subject: str,
        question: str,
        answer: str | None = None,
        *,
        tool_calls: list[dict[str, Any]] | None = None,
        thread: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        asker: str | None = None,
        conversation: str | None = None,
        occurred_at: int | None = None,
        exchange_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[Accepted]:
        key = idempotency_key or new_key()
        body = _body(
            tenant=tenant,
            subject=subject,
            question=question,
            answer=answer,
            tool_calls=tool_calls,
            thread=thread,
            agent=agent,
            model=model,
            asker=asker,
            conversation=conversation,
            occurred_at=occurred_at,
            exchange_id=exchange_id,
        )
        return Call("POST", "/v1/exchanges", _model(Accepted), json=body, headers={IDEMPOTENCY_HEADER: key}, safe=True)

    @staticmethod
    def part(exchange_id: str, kind: str, tenant: str, subject: str, **fields: Any) -> Call[Accepted]:
        """One streamed part (kind: question, tool-calls, answer). Not retried once sent: a part has no key."""
        body = _body(tenant=tenant, subject=subject, **fields)
        return Call("POST", f"/v1/exchanges/{seg(exchange_id)}/{kind}", _model(Accepted), json=body)

    @staticmethod
    def context(
        tenant: str,
        subject: str,
        *,
        after: Position | None = None,
        wait: float | None = None,
        question: str | None = None,
        agent: str | None = None,
    ) -> Call[Context]:
        params = _query(after=after, wait=wait, question=question, agent=agent)
        path = subject_path(tenant, subject) + "/context"
        return Call("GET", path, _model(Context), params=params, safe=True, etag=True)

    @staticmethod
    def public_context(tenant: str, *, after: Position | None = None, wait: float | None = None) -> Call[Context]:
        path = f"/v1/tenants/{seg(tenant)}/public/context"
        return Call("GET", path, _model(Context), params=_query(after=after, wait=wait), safe=True, etag=True)

    @staticmethod
    def remember(
        tenant: str,
        subject: str | None,
        text: str,
        *,
        agent: str | None = None,
        scope: str | None = None,
        source: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[FactAccepted]:
        """A subject's fact, or with subject None the tenant's knowledge; always with an idempotency key."""
        key = idempotency_key or new_key()
        path = f"/v1/tenants/{seg(tenant)}/facts" if subject is None else subject_path(tenant, subject) + "/facts"
        body = _body(text=text, agent=agent, scope=scope, source=source if subject is not None else None)
        return Call("POST", path, _model(FactAccepted), json=body, headers={IDEMPOTENCY_HEADER: key}, safe=True)

    @staticmethod
    def facts(
        tenant: str,
        subject: str | None,
        *,
        after: Position | None = None,
        wait: float | None = None,
        agent: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Call[Facts]:
        """A subject's facts (or with subject None the tenant's knowledge); with `q`, recall: those bearing on it."""
        path = f"/v1/tenants/{seg(tenant)}/facts" if subject is None else subject_path(tenant, subject) + "/facts"
        params = _query(after=after, wait=wait, agent=agent, q=q, limit=limit, cursor=cursor)
        return Call("GET", path, _model(Facts), params=params, safe=True)

    @staticmethod
    def forget(tenant: str, subject: str | None, fact_id: str, *, after: Position | None = None) -> Call[FactAccepted]:
        base = f"/v1/tenants/{seg(tenant)}/facts" if subject is None else subject_path(tenant, subject) + "/facts"
        # deleting a fact twice leaves it deleted: safe (the second answers 404 once applied)
        path = f"{base}/{seg(fact_id)}"
        return Call("DELETE", path, _model(FactAccepted), params=_query(after=after), safe=True)

    @staticmethod
    def revise(
        tenant: str, subject: str | None, fact_id: str, text: str, *, agent: str | None = None
    ) -> Call[FactAccepted]:
        base = f"/v1/tenants/{seg(tenant)}/facts" if subject is None else subject_path(tenant, subject) + "/facts"
        return Call("PATCH", f"{base}/{seg(fact_id)}", _model(FactAccepted), json=_body(text=text, agent=agent))

    @staticmethod
    def tools() -> Call[list[dict[str, Any]]]:
        return Call("GET", "/v1/tools", _json, safe=True)

    @staticmethod
    def run_tool(
        tenant: str,
        subject: str,
        agent: str,
        name: str,
        arguments: dict[str, Any],
        *,
        exchange_id: str | None = None,
        call_index: int | None = None,
        idempotency_key: str | None = None,
    ) -> Call[dict[str, Any]]:
        key = idempotency_key or new_key()
        path = f"{subject_path(tenant, subject)}/agents/{seg(agent)}/tools/{seg(name)}"
        body = _body(arguments=arguments, exchange_id=exchange_id, call_index=call_index)
        return Call("POST", path, _json, json=body, headers={IDEMPOTENCY_HEADER: key}, safe=True)

    @staticmethod
    def search(
        tenant: str, thread: str, q: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Call[dict[str, Any]]:
        """Search a thread's archive (thread: `session:<subject>`, `public`, `automation:<agent>`)."""
        path = f"/v1/tenants/{seg(tenant)}/threads/{seg(thread)}/search"
        return Call("GET", path, _json, params=_query(q=q, limit=limit, cursor=cursor), safe=True)

    @staticmethod
    def conversations(tenant: str, thread: str) -> Call[dict[str, Any]]:
        return Call("GET", f"/v1/tenants/{seg(tenant)}/threads/{seg(thread)}/conversations", _json, safe=True)

    @staticmethod
    def calendar(tenant: str, thread: str, **params: Any) -> Call[dict[str, Any]]:
        path = f"/v1/tenants/{seg(tenant)}/threads/{seg(thread)}/calendar"
        return Call("GET", path, _json, params=_query(**params), safe=True)

    @staticmethod
    def receipt(
        tenant: str,
        subject: str | None,
        agent: str,
        exchange_id: str,
        result: str,
        *,
        call_index: int | None = None,
        detail: str | None = None,
        thread: str | None = None,
        receipt_id: str | None = None,
    ) -> Call[ReceiptAccepted]:
        """A tool call's checked result (`call_index`), or the answer's claimed action's (None): passed,
        failed, failed_expected, not_run. Sent again after a failure under the same receipt id, it may be
        kept twice; the newest counts, so the answer's state is the same."""
        body = _body(
            tenant=tenant,
            subject=subject,
            agent=agent,
            exchange_id=exchange_id,
            call_index=call_index,
            result=result,
            detail=detail,
            thread=thread,
            receipt_id=receipt_id or new_key(),
        )
        return Call("POST", "/v1/receipts", _model(ReceiptAccepted), json=body, safe=True)

    @staticmethod
    def runs(tenant: str, **params: Any) -> Call[Any]:
        return Call("GET", f"/v1/tenants/{seg(tenant)}/runs", _json, params=_query(**params), safe=True)

    @staticmethod
    def erase(tenant: str, subject: str, *, reason: str | None = None) -> Call[PrivacyRequest]:
        """Operators: erase a subject. Asking twice erases once (the worker applies requests by id): safe."""
        body = _body(reason=reason)
        return Call("POST", subject_path(tenant, subject) + "/erase", _model(PrivacyRequest), json=body, safe=True)

    @staticmethod
    def export(tenant: str, subject: str) -> Call[dict[str, Any] | PrivacyRequest]:
        """Operators: the subject's bundle, or (not done within the wait) the request to fetch it by later."""
        return Call("POST", subject_path(tenant, subject) + "/export", _export, safe=True)

    @staticmethod
    def ledger(
        tenant: str, *, subject: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> Call[LedgerPage]:
        params = _query(subject=subject, limit=limit, cursor=cursor)
        return Call("GET", f"/v1/tenants/{seg(tenant)}/ledger", _ledger, params=params, safe=True)
