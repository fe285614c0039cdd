"""What both clients share: building a request from a Call, reading its answer, and when to retry."""

from __future__ import annotations

from typing import Any, TypeVar

import httpx

from memlog_client.calls import RETRY_STATUSES, Call, retry_delay
from memlog_client.errors import TransportError, refusal

T = TypeVar("T")
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)  # nothing reached the API


class Sender:
    """Args:
    base_url: the API, e.g. http://localhost:8000.
    token: a backend or operator credential, sent as `Authorization: Bearer`.
    retries: attempts after the first, for calls that are safe to send again.
    backoff: the first wait between attempts, doubled each time (a 503's Retry-After overrides it).
    """

    def __init__(self, base_url: str, token: str | None, retries: int, backoff: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.retries = retries
        self.backoff = backoff
        self._etags: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[str, Any]] = {}

    def _cache_key(self, call: Call[Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
        return call.path, tuple(sorted((k, str(v)) for k, v in call.params.items()))

    def request(self, client: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
        headers = {**self.headers, **call.headers}
        if call.etag and (held := self._etags.get(self._cache_key(call))):
            headers["If-None-Match"] = held[0]
        return client.build_request(
            call.method, self.base_url + call.path, params=dict(call.params), json=call.json, headers=headers
        )

    def broken(self, call: Call[Any], exc: httpx.TransportError, attempt: int) -> float:
        """Seconds to wait before sending again, or raises: a call that is not safe is sent again only
        when nothing of it reached the API."""
        sent = not isinstance(exc, NOT_SENT)
        if attempt < self.retries and (call.safe or not sent):
            return retry_delay(attempt, None, self.backoff)
        raise TransportError(f"{call.method} {call.path}: {type(exc).__name__} {exc}", maybe_applied=sent) from exc

    def again_after(self, call: Call[Any], response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before sending again after this answer, None to take it as it is."""
        if attempt >= self.retries or not call.safe:
            return None
        waits = response.status_code in RETRY_STATUSES or (
            response.status_code == 409 and "Retry-After" in response.headers  # a first attempt still running
        )
        return retry_delay(attempt, response.headers.get("Retry-After"), self.backoff) if waits else None

    def answer(self, call: Call[T], response: httpx.Response) -> T:
        """The typed answer, or the typed refusal raised."""
        key = self._cache_key(call)
        if response.status_code == 304 and key in self._etags:
            held: T = self._etags[key][1]
            return held
        if response.status_code >= 400:
            try:
                body: Any = response.json()
            except ValueError:
                body = {"detail": [{"loc": [], "msg": response.text[:200], "type": "error"}]}
            after = response.headers.get("Retry-After")
            raise refusal(response.status_code, body, float(after) if after and after.isdigit() else None)
        value = call.read(response)
        if call.etag and (etag := response.headers.get("ETag")):
            self._etags[key] = (etag, value)
        return value
