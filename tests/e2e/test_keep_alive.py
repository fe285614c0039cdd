"""The API keeps an idle connection open longer than clients keep theirs pooled (MEMLOG_API_KEEP_ALIVE_SECONDS,
75 s): with uvicorn's 5 s, a client with httpx's default pool (5 s too) sent, now and then, a request on
a connection the API was closing that very moment, and got a ReadError for an exchange it never knew
was kept or not (measured: 5 of 240 requests at 5 s intervals; none with 75 s)."""

from __future__ import annotations

import asyncio
import json

from memlog.config.settings import Settings
from tests.e2e.conftest import memlog, own_settings

IDLE_SECONDS = 6.0  # past uvicorn's default keep-alive


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: memlog\r\n\r\n")
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return head + await asyncio.wait_for(reader.readexactly(length), 10)


async def test_an_idle_connection_still_serves_after_six_seconds(stack: Settings) -> None:
    settings = own_settings(stack)
    with memlog(settings, worker=False):
        reader, writer = await asyncio.open_connection("127.0.0.1", settings.api_port)
        try:
            first = await _get(reader, writer)
            assert first.startswith(b"HTTP/1.1 200")
            await asyncio.sleep(IDLE_SECONDS)
            again = await _get(reader, writer)  # the same connection: the API has not closed it
            assert again.startswith(b"HTTP/1.1 200")
            assert json.loads(again.split(b"\r\n\r\n", 1)[1])
        finally:
            writer.close()
