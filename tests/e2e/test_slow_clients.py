"""Slow clients cannot hold the API (issue 41: 120 connections, idle or sending one header line every
15 s, were all still open after 100 s). With short limits set for the test: 120 slow connections are
closed by the server while they still trickle, /healthz answers throughout; a trickling body is cut,
headers past the limit answer 431, and one address past its share of connections gets 503."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from memlog.config.settings import Settings
from tests.e2e.conftest import api_client, memlog, own_settings

HEADER_SECONDS = 2.0
BODY_SECONDS = 2.0
SLOW = 120
LINE_EVERY = 0.5  # a header line this often: well within any per-read timeout, so only a deadline closes it
TRICKLE_SECONDS = 20.0  # how long a slow client would go on sending, were it not closed


@pytest.fixture(scope="module")
def api(stack: Settings) -> Iterator[Settings]:
    with memlog(
        own_settings(
            stack,
            api_header_timeout_seconds=HEADER_SECONDS,
            api_body_timeout_seconds=BODY_SECONDS,
            api_connections_per_address=SLOW + 40,
        ),
        worker=False,
    ) as settings:
        yield settings


async def slow_client(port: int, idle: bool) -> tuple[float, bytes, bool]:
    """Seconds until the server closed the connection, what it answered, and whether it was still sending."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened = time.monotonic()
    answer = bytearray()

    async def read() -> None:
        while chunk := await reader.read(4096):
            answer.extend(chunk)

    reading = asyncio.create_task(read())
    try:
        if not idle:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: memlog\r\n")
            lines = 0
            while not reading.done() and time.monotonic() - opened < TRICKLE_SECONDS:
                await asyncio.sleep(LINE_EVERY)
                writer.write(b"X-Slow-%d: %s\r\n" % (lines, b"x" * 20))
                lines += 1
        await asyncio.wait_for(reading, TRICKLE_SECONDS + 10)
        closed = time.monotonic() - opened
        return closed, bytes(answer), closed < TRICKLE_SECONDS
    finally:
        writer.close()
        await writer.wait_closed()


async def test_slow_connections_are_closed_while_healthz_answers(api: Settings) -> None:
    port = api.api_port
    polls: list[tuple[int, float]] = []
    done = asyncio.Event()

    async def poll() -> None:
        async with api_client(api, timeout=10) as http:
            while not done.is_set():
                started = time.monotonic()
                polls.append(((await http.get("/healthz")).status_code, time.monotonic() - started))
                await asyncio.sleep(0.1)

    poller = asyncio.create_task(poll())
    try:
        closed = await asyncio.gather(*(slow_client(port, idle=n % 2 == 0) for n in range(SLOW)))
    finally:
        done.set()
        await poller
    assert all(still_sending for _, _, still_sending in closed)  # the server closed each one, not the client
    assert all(answer.startswith(b"HTTP/1.1 408") and b"MEMLOG_API_HEADER_TIMEOUT" in answer for _, answer, _ in closed)
    assert polls and all(status == 200 for status, _ in polls)
    seconds = sorted(at for at, _, _ in closed)
    print(
        f"{SLOW} slow connections (header limit {HEADER_SECONDS:g} s, a line every {LINE_EVERY:g} s or idle): "
        f"closed after {seconds[0]:.2f} to {seconds[-1]:.2f} s; /healthz {len(polls)} times 200, "
        f"slowest {max(t for _, t in polls) * 1000:.0f} ms"
    )


async def test_a_trickling_body_is_cut_and_oversized_headers_answer_431(api: Settings) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", api.api_port)
    body = b'{"tenant": "t", "subject": "s", "question": "q", "answer": "a"}'
    writer.write(b"POST /v1/exchanges HTTP/1.1\r\nHost: memlog\r\nContent-Type: application/json\r\n")
    writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body) + 100, body))
    answer = await asyncio.wait_for(reader.read(4096), BODY_SECONDS + 20)
    assert answer.startswith(b"HTTP/1.1 408") and b"MEMLOG_API_BODY_TIMEOUT" in answer
    assert await asyncio.wait_for(reader.read(), 10) == b""  # and closed
    writer.close()
    await writer.wait_closed()
    async with api_client(api, timeout=10) as http:
        large = await http.get("/healthz", headers={f"x-pad-{n}": "p" * 1000 for n in range(70)})
        assert large.status_code == 431 and "MEMLOG_API_MAX_HEADER_BYTES" in large.text
        fits = await http.get("/healthz", headers={f"x-pad-{n}": "p" * 1000 for n in range(60)})
        assert fits.status_code == 200


async def test_one_address_past_its_connections_gets_503(stack: Settings) -> None:
    with memlog(own_settings(stack, api_connections_per_address=10), worker=False) as settings:
        held = [await asyncio.open_connection("127.0.0.1", settings.api_port) for _ in range(10)]
        reader, writer = await asyncio.open_connection("127.0.0.1", settings.api_port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: memlog\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 10)
        assert answer.startswith(b"HTTP/1.1 503") and b"retry-after: 2" in answer.lower()
        assert b"MEMLOG_API_CONNECTIONS_PER_ADDRESS" in answer
        writer.close()
        for _, held_writer in [*held, (reader, writer)]:
            held_writer.close()
            await held_writer.wait_closed()
        async with api_client(settings, timeout=10) as http:
            for _ in range(100):  # once the server has seen them closed, the address is served again
                if (await http.get("/healthz")).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            else:
                pytest.fail("the address is still refused after its connections closed")
