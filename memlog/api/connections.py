"""Slow clients: what uvicorn's HTTP protocol leaves unbounded, bounded per connection.

uvicorn times out an idle keep-alive connection, but any byte received cancels that timer, and nothing
bounds a request whose headers never end or whose body trickles: 120 connections sending one header
line every 15 s were all still open after 100 s. This protocol (uvicorn's httptools one, with four
checks) closes them:

- headers not complete within `header_seconds` of the request's first byte (of the connection's
  opening, for its first request): 408, closed;
- a body not complete within `body_seconds` of its headers: 408, closed;
- more than `header_bytes` before the headers' blank line: 431, closed, the rest never parsed;
- more than `per_address` connections open from one client address: 503 with Retry-After, closed
  at once (behind a proxy every client shares the proxy's address: raise it there).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from memlog.api.handlers import RETRY_AFTER_SECONDS, problem

LINGER_SECONDS = 1.0
REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}


@dataclass(frozen=True)
class ConnectionLimits:
    """Args:
    header_seconds: MEMLOG_API_HEADER_TIMEOUT_SECONDS.
    body_seconds: MEMLOG_API_BODY_TIMEOUT_SECONDS.
    header_bytes: MEMLOG_API_MAX_HEADER_BYTES: the request line and headers, at most.
    per_address: MEMLOG_API_CONNECTIONS_PER_ADDRESS.
    """

    header_seconds: float
    body_seconds: float
    header_bytes: int
    per_address: int


def refusal(status: int, loc: list[str | int], message: str) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, in the shape of every other refusal."""
    body = json.dumps({"detail": [problem(status, loc, message)]}, ensure_ascii=True).encode()
    retry = b"retry-after: " + RETRY_AFTER_SECONDS.encode() + b"\r\n" if status == 503 else b""
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n%s\r\n"
        % (status, REASONS[status], len(body), retry)
    ) + body


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the four checks; made for a server by `guarded_protocol`."""

    limits: ClassVar[ConnectionLimits]
    open_from: ClassVar[Counter[str]]  # connections open per client address, in this server process

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._address: str | None = None  # counted against its limit while open
        self._in_headers = True
        self._header_bytes = 0
        self._tail = b""  # the last bytes of the previous chunk: a blank line may straddle two
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else ""
        if self.open_from[address] >= self.limits.per_address:
            message = f"{address} holds {self.limits.per_address} connections (MEMLOG_API_CONNECTIONS_PER_ADDRESS)"
            self._refuse(503, ["connection"], message, self._idle())
            return
        self.open_from[address] += 1
        self._address = address
        self._arm(self.limits.header_seconds, self._headers_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._address is not None:
            self.open_from[self._address] -= 1
            if self.open_from[self._address] <= 0:
                del self.open_from[self._address]
            self._address = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_headers:
            room = self.limits.header_bytes - self._header_bytes
            if len(data) > room and b"\r\n\r\n" not in self._tail + data[: max(room, 0) + 4]:
                message = f"the request line and headers pass {self.limits.header_bytes} bytes"
                self._refuse(431, ["header"], message + " (MEMLOG_API_MAX_HEADER_BYTES)", self._idle())
                return
            self._header_bytes += len(data)
            self._tail = data[-3:]
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:
            self._arm(self.limits.header_seconds, self._headers_late)

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._arm(self.limits.body_seconds, self._body_late)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        # what follows is the next request's (bytes of it in this very chunk go uncounted: at most one read)
        self._in_headers, self._header_bytes, self._tail = True, 0, b""
        super().on_message_complete()

    def _headers_late(self) -> None:
        self._deadline = None
        message = f"the headers took more than {self.limits.header_seconds:g} s (MEMLOG_API_HEADER_TIMEOUT_SECONDS)"
        self._refuse(408, ["header"], message, self._idle())

    def _body_late(self) -> None:
        self._deadline = None
        message = f"the body took more than {self.limits.body_seconds:g} s (MEMLOG_API_BODY_TIMEOUT_SECONDS)"
        self._refuse(408, ["body"], message, self.cycle is None or not self.cycle.response_started)

    def _idle(self) -> bool:
        """No answer is being written on this connection: a refusal may go out whole."""
        return self.cycle is None or not self.cycle.response_started or self.cycle.response_complete

    def _refuse(self, status: int, loc: list[str | int], message: str, answer: bool) -> None:
        self._refused = True
        self._disarm()
        if self.transport.is_closing():
            return
        if answer:
            self.transport.write(refusal(status, loc, message))
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        # closed for writing at once; what the client still sends is read and dropped a moment longer, so
        # it reads the refusal (a socket closed with unread bytes answers them with a reset instead)
        self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _arm(self, seconds: float, late: Callable[[], None]) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedProtocol]:
    """The protocol class a uvicorn server takes as `http`, with its own count of connections per address."""
    made: type[GuardedProtocol] = type(
        "GuardedProtocol", (GuardedProtocol,), {"limits": limits, "open_from": Counter()}
    )
    return made
