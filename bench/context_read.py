"""Benchmark: a context read next to a raw Redis GET of the same bytes, for a 20- and a 100-exchange session.

Prints p50 / p99 of: a raw Redis GET of the context's JSON (the floor), the session store's read
(the decoded session; and the ready form, where the store keeps one), the evidence join every read
makes (one query of the trace store for the runs that served the exchanges), the context read over the
HTTP API, and the same read with `If-None-Match` (a 304); beside them HTTP's own floor, a bare ASGI app
on the same server answering the same bytes (bench/http_floor.py), and a round trip to the API's
`/healthz`. HTTP is measured with aiohttp's client on one kept-alive connection (the client a backend
would pick for speed); one row repeats the read with httpx, whose client alone costs more than the
server's answer. Ratios are to the floor of the same run. Every round runs each of them once,
interleaved after a warm-up, so the machine's noise falls on all alike, in two groups each with its own
floor: the store's reads, then the rest (HTTP's server and client slow a GET interleaved with them).
This process collects its garbage between rounds, never during a timed call (bench.projection).
No assertions: shared machines are noisy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import httpx
import redis.asyncio as aioredis

from bench.projection import interleaved, on_local_stack, quantiles
from bench.threads import exchange
from memlog.adapters.redis_store import thread_base
from memlog.api.models import Context
from memlog.config.settings import Settings
from memlog.dev.processes import free_port, start_api, start_worker
from memlog.services import Services, open_services
from projections.session import ThreadKey
from streams.topics import ensure_topics

LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"
READS = 2000
SIZES = (20, 100)


def report(label: str, sample: tuple[float, float], floor: tuple[float, float] | None = None) -> None:
    ratio = f"   x{sample[0] / floor[0]:5.1f} (p50)  x{sample[1] / floor[1]:5.1f} (p99)" if floor else ""
    print(f"  {label:48} p50 {sample[0]:7.3f} ms   p99 {sample[1]:7.3f} ms{ratio}")


async def slow_read(services: Services, subject: str) -> bytes:
    """The context read as it is made without the ready context: the session decoded, rendered, its
    evidence joined, validated and serialised by the model (in process, no HTTP)."""
    thread = await services.contexts.session("bench", subject, question=None, agent=None, after=None, wait=None)
    return Context.of(thread).model_dump_json().encode()


async def ready_mget(redis: aioredis.Redis, base: str) -> list[object]:
    """The command the ready read sends (memlog/adapters/redis_store.py): one MGET, with no Python after."""
    return await redis.mget(f"{base}:t", f"{base}:v", f"{base}:m", f"{base}:n")


@contextlib.asynccontextmanager
async def bare_server(body: bytes) -> AsyncIterator[Callable[[], Awaitable[bytes]]]:
    """bench/http_floor.py serving `body` on a port of its own, and a GET of it on one kept-alive connection."""
    with tempfile.NamedTemporaryFile(suffix=".json") as file:
        file.write(body)
        file.flush()
        port = free_port()
        env = {**os.environ, "MEMLOG_BENCH_BODY_FILE": file.name}
        server = await asyncio.create_subprocess_exec(sys.executable, "-m", "bench.http_floor", str(port), env=env)
        try:
            async with aiohttp.ClientSession(
                f"http://127.0.0.1:{port}", connector=aiohttp.TCPConnector(limit=1)
            ) as client:

                async def get() -> bytes:
                    async with client.get("/") as answer:
                        return await answer.read()

                for _ in range(100):
                    try:
                        if await get() == body:
                            break
                    except aiohttp.ClientConnectionError:
                        await asyncio.sleep(0.1)
                yield get
        finally:
            server.terminate()
            await server.wait()


async def run(settings: Settings) -> None:
    await ensure_topics(settings)
    worker = await asyncio.to_thread(start_worker, settings, LOGS)
    api = await asyncio.to_thread(start_api, settings, LOGS)
    try:
        async with (
            open_services(settings, producer=True) as services,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.api_port}", timeout=60) as http,
            aiohttp.ClientSession(
                f"http://127.0.0.1:{settings.api_port}", connector=aiohttp.TCPConnector(limit=1)
            ) as lean,
            contextlib.AsyncExitStack() as stack,
        ):

            async def fetch(path: str, headers: dict[str, str] | None = None) -> bytes:
                async with lean.get(path, headers=headers) as answer:
                    if answer.status >= 400:
                        raise RuntimeError(f"{path}: {answer.status}")
                    return await answer.read()

            redis = aioredis.Redis.from_url(settings.redis)
            for size in SIZES:
                subject = f"reader-{size}"
                last = None
                for number in range(size):
                    last = await services.producer.record_exchange({**exchange(subject, number), "subject": subject})
                assert last is not None
                url = f"/v1/tenants/bench/subjects/{subject}/context"
                response = await http.get(url, params={"after": last.position.token()})
                while response.status_code == 503:  # the worker is still catching up
                    response = await http.get(url, params={"after": last.position.token()})
                response.raise_for_status()
                body = response.content
                key = ThreadKey.session("bench", subject)
                blob = f"{settings.redis_prefix}:bench:context:{size}"
                await redis.set(blob, body)
                ids = [str(view["exchange_id"]) for view in response.json()["exchanges"]]
                etag = response.headers.get("etag")
                ready_read = getattr(services.sessions, "read_ready", None)
                floor_label = "raw Redis GET of the same bytes (the floor)"
                store: dict[str, Callable[[int], Awaitable[object]]] = {
                    floor_label: lambda _, blob=blob: redis.get(blob),
                    "store read, decoded session": lambda _, key=key: services.sessions.read(key),
                }
                if ready_read is not None:
                    store["store read, ready form"] = lambda _, key=key, read=ready_read: read(key)
                    base = thread_base(settings.redis_prefix, key)
                    store["its MGET alone, raw (the client's floor for it)"] = lambda _, base=base: ready_mget(
                        redis, base
                    )
                bare = await stack.enter_async_context(bare_server(body))
                around: dict[str, Callable[[int], Awaitable[object]]] = {
                    floor_label: lambda _, blob=blob: redis.get(blob),
                    "evidence: the traces' runs of its exchanges": lambda _, subject=subject, ids=ids: (
                        services.evidence.runs("bench", "session", subject, ids)
                    ),
                    "the read recomputed in process (no ready context)": lambda _, subject=subject: slow_read(
                        services, subject
                    ),
                    "HTTP's floor: a bare ASGI app, same server, same bytes": lambda _, bare=bare: bare(),
                    "an HTTP round trip to the API (GET /healthz)": lambda _: fetch("/healthz"),
                    "context read over the HTTP API": lambda _, url=url: fetch(url),
                    "... the same with httpx as the client": lambda _, url=url: http.get(url),
                }
                if etag:
                    around["... with If-None-Match (304)"] = lambda _, url=url, etag=etag: fetch(
                        url, {"If-None-Match": etag}
                    )
                print(f"\ncontext of a {size}-exchange session ({len(body):,} bytes as JSON), {READS} rounds:")
                for title, calls in (("the store's reads", store), ("the rest of a read, and HTTP", around)):
                    taken = dict(zip(calls, await interleaved(list(calls.values()), READS), strict=True))
                    floor = quantiles(taken.pop(floor_label))
                    print(f" {title}, interleaved with the floor:")
                    report(floor_label, floor)
                    for label, samples in taken.items():
                        report(label, quantiles(samples), floor)
            await redis.aclose()
    finally:
        api.stop()
        worker.stop()


if __name__ == "__main__":
    on_local_stack(run)
