"""Benchmark: the context read with recall and local embeddings, next to its floor, alone and with 8
concurrent readers.

Writes 100 subjects with 30 facts each and a tenant's 20 facts of knowledge, all with their vectors
(as the worker stores them), then measures p50/p99 of:

- the floor: a bare MongoDB find of the subject's and the tenant's fact documents plus one encode of
  the question with the same local model (all-MiniLM-L6-v2), as memlog would have to do at least;
- memlog's context read over HTTP (session from Redis, both fact documents, the question's vector,
  ranking, rendering, JSON), every question distinct so no cache helps;
- the same read repeating recent questions (the question vector cache), for reading only.

The same with 8 readers at once (the floor's encodes run in threads, as memlog's do). Ratios p99/p99.
The three are measured interleaved (each reader runs the floor, then memlog's read, then the cached
read, for every sample), so a load that comes and goes on the machine falls on all of them alike.
No assertions.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import httpx

from bench.projection import on_local_stack
from memlog.adapters.embeddings import LocalMiniLM
from memlog.config.settings import Settings
from memlog.dev.processes import start_api
from memlog.services import open_services
from projections.facts import TENANT_KNOWLEDGE, Fact, SubjectFacts
from projections.position import Position
from projections.words import index_terms
from streams.steps.facts import embedded
from streams.topics import ensure_topics

LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"
SUBJECTS = 100
PER_SUBJECT = 30
KNOWLEDGE = 20
SAMPLES = 300
ITEMS = ["diamonds", "iron", "torches", "redstone", "emeralds", "wheat", "potions", "maps", "books", "copper"]
PLACES = ["base", "farm", "mine", "tower", "portal", "village", "castle", "harbour", "bunker", "garden"]
TENANT = "bench"


def subject_facts(number: int, now: int) -> SubjectFacts:
    rng = random.Random(number)
    facts = []
    for index in range(PER_SUBJECT):
        text = (
            f"my {rng.choice(PLACES)} {index} is at {rng.randint(-999, 999)} {rng.randint(0, 255)} "
            f"{rng.randint(-999, 999)} and holds {rng.randint(1, 64)} {rng.choice(ITEMS)}"
        )
        facts.append(Fact(f"f{index}", "shared", None, text, "subject", now - index, now - index, index_terms(text)))
    return SubjectFacts(tuple(facts), last_question_at=now, expires_at=now + 365 * 86_400_000)


def knowledge(now: int) -> SubjectFacts:
    facts = [
        Fact(f"k{n}", "shared", None, f"rule {n}: {place} builds need {item}", "subject", now, now, ())
        for n, (place, item) in enumerate(zip(PLACES * 2, ITEMS + ITEMS[::-1], strict=True))
    ][:KNOWLEDGE]
    return SubjectFacts(tuple(facts), 0, now + 10 * 365 * 86_400_000)


def question(n: int) -> str:
    return f"where did I put my {ITEMS[n % 10]} at the {PLACES[(n // 10) % 10]} number {n}?"


async def timed(
    calls: Sequence[Callable[[int], Awaitable[object]]], count: int, readers: int
) -> list[tuple[float, float]]:
    """(p50, p99) in ms of each call, taken in turn by each reader for every sample."""
    samples: list[list[float]] = [[] for _ in calls]
    counter = iter(range(count))

    async def reader() -> None:
        for n in counter:
            for kept, call in zip(samples, calls, strict=True):
                started = time.perf_counter()
                await call(n)
                kept.append(time.perf_counter() - started)

    await asyncio.gather(*(reader() for _ in range(readers)))
    return [(statistics.median(s) * 1e3, sorted(s)[max(0, int(len(s) * 0.99) - 1)] * 1e3) for s in samples]


def report(label: str, sample: tuple[float, float], floor: tuple[float, float] | None = None) -> None:
    ratio = f"   p99 x{sample[1] / floor[1]:.2f} the floor, p50 x{sample[0] / floor[0]:.2f}" if floor else ""
    print(f"  {label:58} p50 {sample[0]:8.2f} ms   p99 {sample[1]:8.2f} ms{ratio}", flush=True)


async def run(settings: Settings) -> None:
    settings = settings.model_copy(update={"embeddings": "local"})
    await ensure_topics(settings)
    now = int(time.time() * 1000)
    model = LocalMiniLM()
    async with open_services(settings, producer=True) as services:
        await services.facts.prepare()
        started = time.perf_counter()
        for n in range(SUBJECTS):
            state = await embedded(subject_facts(n, now), model)
            await services.facts.write(TENANT, f"player-{n:03d}", state, Position("facts", 0, n))
        await services.facts.write(
            TENANT, TENANT_KNOWLEDGE, await embedded(knowledge(now), model), Position("facts", 1, 0)
        )
        print(
            f"wrote {SUBJECTS} subjects x {PER_SUBJECT} facts and {KNOWLEDGE} of knowledge, with vectors, "
            f"in {time.perf_counter() - started:.1f}s",
            flush=True,
        )
        collection = services.database["facts"]
        ids = lambda n: [f"{len(TENANT)}:{TENANT}:player-{n % SUBJECTS:03d}", f"{len(TENANT)}:{TENANT}:"]  # noqa: E731

        async def floor(n: int) -> None:
            found = await collection.find({"_id": {"$in": ids(n)}}).to_list(None)
            assert len(found) == 2
            await asyncio.to_thread(model.encode, [question(n)])

        api = await asyncio.to_thread(start_api, settings, LOGS)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.api_port}", timeout=60) as http:

                async def read(n: int, offset: int = 0) -> None:
                    response = await http.get(
                        f"/v1/tenants/{TENANT}/subjects/player-{n % SUBJECTS:03d}/context",
                        params={"question": question(n + offset), "agent": "helper"},
                    )
                    assert response.status_code == 200 and response.json()["facts"], response.text

                for _ in range(2):  # warm both: connections, the model's first call, the API's first read
                    await timed([floor, lambda n: read(n, 100_000)], 20, 1)
                for readers in (1, 8):
                    offset = 10_000 * readers
                    base, memlog, cached = await timed(
                        [
                            lambda n, o=offset: floor(n + o),
                            lambda n, o=offset: read(n, o),
                            lambda n, o=offset: read(n % 20, o),
                        ],
                        SAMPLES,
                        readers,
                    )
                    print(f"\n{readers} reader{'s' if readers > 1 else ''}:")
                    report("floor: MongoDB find of both fact documents + one encode", base)
                    report("memlog context read with recall, distinct questions", memlog, base)
                    report("memlog context read, 20 recent questions repeated", cached, base)
        finally:
            api.stop()


if __name__ == "__main__":
    on_local_stack(run)
