"""Benchmark: the local embedding model on the read path, through QuestionEncoder. No assertions.

Prints p50/p99 (ms) of: one question encoded cold (never asked before), a cached question, 8
distinct questions asked at once through QuestionEncoder (one batch) next to the same 8 encoded one
after another, and a batch of 30 short facts. `--threads N` runs BLAS on N threads (default 1,
MEMLOG_EMBEDDINGS_THREADS' default). Needs no local stack: `python -m bench.embeddings`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

from memlog.adapters.embeddings import LocalMiniLM, QuestionEncoder

TOPICS = ["coffee shop", "dog", "base", "holiday", "deadline", "car", "garden", "password manager", "diet", "band"]


def question(number: int) -> str:
    return f"what did I tell you about my {TOPICS[number % len(TOPICS)]} last week, number {number}?"


def fact(number: int) -> str:
    return f"my {TOPICS[number % len(TOPICS)]} {number} is near the station and I visit it on Fridays"


async def sample(call: Callable[[int], Awaitable[object]], count: int) -> tuple[float, float]:
    await call(-1)  # warm
    samples = []
    for number in range(count):
        started = time.perf_counter()
        await call(number)
        samples.append((time.perf_counter() - started) * 1e3)
    samples.sort()
    return samples[len(samples) // 2], samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def report(label: str, result: tuple[float, float]) -> None:
    print(f"  {label:58} p50 {result[0]:8.2f} ms   p99 {result[1]:8.2f} ms", flush=True)


async def run(threads: int, count: int) -> None:
    model = LocalMiniLM(threads=threads)
    encoder = QuestionEncoder(model)
    asked = iter(range(10**9))

    async def cold(_: int) -> object:
        return await encoder.vector(question(next(asked)))

    async def cached(_: int) -> object:
        return await encoder.vector(question(0))

    async def together(_: int) -> object:
        base = 1_000_000 + 8 * next(asked)
        return await asyncio.gather(*(encoder.vector(question(base + i)) for i in range(8)))

    async def one_by_one(_: int) -> object:
        base = 1_000_000 + 8 * next(asked)
        return [await model.embed([question(base + i)]) for i in range(8)]

    facts = [fact(i) for i in range(30)]

    async def thirty_facts(_: int) -> object:
        return await encoder.vectors(facts)

    print(f"all-MiniLM-L6-v2 on numpy, BLAS threads {threads}, {count} samples (fewer for the long ones)")
    report("one question, cold (QuestionEncoder.vector)", await sample(cold, count))
    report("one question, cached", await sample(cached, count))
    report("8 distinct questions at once (QuestionEncoder, one batch)", await sample(together, count // 4))
    report("8 questions one after another (LocalMiniLM.embed)", await sample(one_by_one, count // 4))
    report("30 short facts (QuestionEncoder.vectors)", await sample(thirty_facts, count // 10))
    print(f"  QuestionEncoder: {encoder.batches} encodes for {encoder.encoded} questions, {encoder.hits} cache hits")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--count", type=int, default=300)
    arguments = parser.parse_args()
    asyncio.run(run(arguments.threads, arguments.count))


if __name__ == "__main__":
    main()
