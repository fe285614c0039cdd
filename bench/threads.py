"""Benchmark: reading a 100-exchange session and folding one, next to a raw Redis GET of the same bytes.

Prints p50 / p99 of: a raw Redis GET of the context's bytes (the floor), the session read from the
store (three Redis reads in one MULTI, decoded), and the context read over the HTTP API; then the
fold's cost: the extractive summary alone, and a whole fold (read, plan, summarize, produce) until the
worker has applied it. No assertions: shared machines are noisy.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import httpx
import redis.asyncio as aioredis

from bench.projection import latencies, on_local_stack
from memlog.adapters.summarizers import ExtractiveSummarizer
from memlog.config.settings import Settings
from memlog.dev.processes import start_api, start_worker
from memlog.services import open_services
from projections.session import ThreadKey, plan_fold
from projections.summary import extractive_summary
from streams.folds import FoldService
from streams.topics import ensure_topics

LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"
READS = 1000


def exchange(subject: str, number: int) -> dict[str, object]:
    return {
        "tenant": "bench",
        "subject": subject,
        "question": f"Where did I leave the {number}th chest, and what was in it? " * 2,
        "tool_calls": [
            {
                "name": "find_chest",
                "arguments": {"n": number},
                "result": {
                    "at": [number, 64, -number],
                    "items": [{"name": "diamond", "count": number % 64}, {"name": "torch", "count": 16}],
                },
            }
        ],
        "answer": f"Chest {number} is at {number} 64 -{number}; it holds {number % 64} diamonds and 16 torches.",
    }


async def wait_for(services_settings: Settings, position_token: str) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{services_settings.api_port}", timeout=60) as http:
        response = await http.get("/v1/tenants/bench/subjects/x/context", params={"after": position_token})
        response.raise_for_status()


def report(label: str, sample: tuple[float, float], floor: tuple[float, float] | None = None) -> None:
    ratio = f"   x{sample[0] / floor[0]:.1f} the floor (p50)" if floor else ""
    print(f"  {label:50} p50 {sample[0]:8.3f} ms   p99 {sample[1]:8.3f} ms{ratio}")


async def run(settings: Settings) -> None:
    await ensure_topics(settings)
    worker = await asyncio.to_thread(start_worker, settings, LOGS)
    api = await asyncio.to_thread(start_api, settings, LOGS)
    try:
        async with open_services(settings, producer=True) as services:
            last = None
            for number in range(100):
                last = await services.producer.record_exchange(exchange("reader", number))
            assert last is not None
            await wait_for(settings, last.position.token())
            key = ThreadKey.session("bench", "reader")
            session = await services.sessions.read(key)
            assert session is not None and len(session.exchanges) == 100
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.api_port}", timeout=60) as http:
                url = "/v1/tenants/bench/subjects/reader/context"
                body = (await http.get(url)).content
                redis = aioredis.Redis.from_url(settings.redis)
                await redis.set(f"{settings.redis_prefix}:bench:context", body)
                floor = await latencies(lambda: redis.get(f"{settings.redis_prefix}:bench:context"), READS)
                store = await latencies(lambda: services.sessions.read(key), READS)
                rendered = await latencies(lambda: _read_and_render(services, key), READS)
                over_http = await latencies(lambda: http.get(url), READS)
                await redis.aclose()
            print(f"\ncontext of a 100-exchange session ({session.head.tokens:,} tokens, {len(body):,} bytes as JSON):")
            report("raw Redis GET of the same bytes (the floor)", floor)
            report("memlog session read from Redis (decoded)", store, floor)
            report("memlog session read + rendered text", rendered, floor)
            report("memlog context read over the HTTP API", over_http, floor)

            # the fold's cost: our own fold of the reader's session (the worker would not fold 100 exchanges,
            # so a policy one lower is used here), then the worker's own background fold as a backend sees it
            policy = replace(settings.thread_policy(), fold_exchanges=99)
            folded = plan_fold(session, policy)
            summary_ms = await latencies(
                lambda: asyncio.sleep(0, extractive_summary("", folded, settings.summary_chars)), 200
            )
            fold_service = FoldService(services.sessions, services.producer, ExtractiveSummarizer(), policy, "bench")
            started = time.perf_counter()
            position = await fold_service.fold(key)
            produced = time.perf_counter() - started
            assert position is not None
            await wait_for(settings, position.token())
            applied = time.perf_counter() - started
            for number in range(100):
                await services.producer.record_exchange(exchange("folder", number))
            started = time.perf_counter()
            last = await services.producer.record_exchange(exchange("folder", 100))
            folder = ThreadKey.session("bench", "folder")
            while True:
                after = await services.sessions.read(folder)
                if after is not None and after.head.summary:
                    break
                await asyncio.sleep(0.005)
            background = time.perf_counter() - started
            print(f"\nfold of a 100-exchange session ({len(folded)} exchanges into a summary, extractive):")
            report("extractive summary alone", summary_ms)
            print(f"  {'read + plan + summarize + produce ThreadFolded':50} {produced * 1e3:8.1f} ms")
            print(f"  {'... until the worker has applied it':50} {applied * 1e3:8.1f} ms")
            print(
                f"  {'101st exchange produced -> worker folded it':50} {background * 1e3:8.1f} ms "
                f"({len(after.exchanges)} exchanges and {len(after.head.summary)} summary characters left)"
            )
    finally:
        api.stop()
        worker.stop()


async def _read_and_render(services: object, key: ThreadKey) -> str:
    session = await services.sessions.read(key)  # type: ignore[attr-defined]
    return session.render() if session else ""


if __name__ == "__main__":
    on_local_stack(run)
