"""Benchmark: recall with 30 facts per subject and 10,000 subjects, next to a bare MongoDB find.

Writes 10,000 subjects' facts through the fact store (keyword index included), then measures p50/p99
of: a bare find of one subject's document (the floor), memlog's keyword recall (load, narrow, BM25),
the same through the HTTP context read; and, on 100 subjects whose facts carry vectors, recall with
the local embedding model (the question embedded each time). No assertions.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import httpx

from adapters.embeddings import LocalMiniLM
from bench.projection import latencies, on_local_stack
from config.settings import Settings
from memlog.memory import Memory
from memlog.processes import start_api
from memlog.services import open_services
from projections.facts import Fact, SubjectFacts, index_terms
from projections.position import Position
from streams.steps.facts import embedded
from streams.topics import ensure_topics

LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"
SUBJECTS = 10_000
PER_SUBJECT = 30
EMBEDDED_SUBJECTS = 100
SAMPLES = 500
ITEMS = ["diamonds", "iron", "torches", "redstone", "emeralds", "wheat", "potions", "maps", "books", "copper"]
PLACES = ["base", "farm", "mine", "tower", "portal", "village", "castle", "harbour", "bunker", "garden"]


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


def report(label: str, sample: tuple[float, float], floor: tuple[float, float] | None = None) -> None:
    ratio = f"   x{sample[0] / floor[0]:.1f} the floor (p50)" if floor else ""
    print(f"  {label:52} p50 {sample[0]:8.3f} ms   p99 {sample[1]:8.3f} ms{ratio}")


async def run(settings: Settings) -> None:
    await ensure_topics(settings)
    now = int(time.time() * 1000)
    async with open_services(settings, producer=True) as services:
        await services.facts.prepare()
        started = time.perf_counter()
        for chunk in range(0, SUBJECTS, 500):
            await services.facts.write_many(
                [
                    ("bench", f"player-{n:05d}", subject_facts(n, now), Position("facts", 0, n))
                    for n in range(chunk, min(chunk + 500, SUBJECTS))
                ]
            )
            print(f"  {chunk + 500:,} subjects written, {time.perf_counter() - started:.1f}s", flush=True)
        print(f"wrote {SUBJECTS:,} subjects x {PER_SUBJECT} facts in {time.perf_counter() - started:.1f}s")
        model = LocalMiniLM()
        print("embedding the facts of 100 subjects", flush=True)
        for n in range(EMBEDDED_SUBJECTS):
            state = await embedded(subject_facts(n, now), model)
            await services.facts.write("bench-vec", f"player-{n:05d}", state, Position("facts", 1, n))
        rng = random.Random(7)
        pick = lambda: f"player-{rng.randrange(SUBJECTS):05d}"  # noqa: E731
        question = "where did I put my diamonds at the tower?"
        collection = services.database["facts"]
        floor = await latencies(lambda: collection.find_one({"_id": f"5:bench:{pick()}"}), SAMPLES)
        keyword = Memory(
            services.producer, services.facts, settings.fact_policy(), "bench", slots=services.current.fact_slots
        )
        by_keyword = await latencies(lambda: keyword.recall("bench", pick(), question, None), SAMPLES)
        similar = Memory(
            services.producer,
            services.facts,
            settings.fact_policy(),
            "bench",
            model,
            slots=services.current.fact_slots,
        )
        vec_pick = lambda: f"player-{rng.randrange(EMBEDDED_SUBJECTS):05d}"  # noqa: E731
        by_vector = await latencies(lambda: similar.recall("bench-vec", vec_pick(), question, None), 200)
        api = await asyncio.to_thread(start_api, settings, LOGS)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.api_port}", timeout=60) as http:
                over_http = await latencies(
                    lambda: http.get(f"/v1/tenants/bench/subjects/{pick()}/context", params={"question": question}),
                    SAMPLES,
                )
        finally:
            api.stop()
    print(f"\nrecall over {SUBJECTS:,} subjects with {PER_SUBJECT} facts each:")
    report("bare MongoDB find of the subject's document (floor)", floor)
    report("memlog recall, keyword (load, narrow, BM25)", by_keyword, floor)
    report("memlog context read with recall, over HTTP", over_http, floor)
    report("memlog recall with the local embedding model", by_vector, floor)


if __name__ == "__main__":
    on_local_stack(run)
