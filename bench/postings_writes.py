"""What postings (issue 41, memlog/adapters/mongo_postings.py) add to the archive's writes: the same entries
archived with and without them, interleaved round by round, each into a database of its own.

Two shapes: short exchanges (6 to 24 words, the live path's usual) and 22 KB answers (about 1,000
distinct words, bench/search_bounds.py's). Prints seconds per round and the ratio with/without.

    python -m bench.postings_writes [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from pymongo import AsyncMongoClient

from memlog.adapters.mongo_archives import MongoConversationArchive
from memlog.adapters.mongo_search import MongoArchiveSearch
from projections.archives import ConversationRef, Entry, index_terms

WORDS = [
    "red",
    "chest",
    "gate",
    "forge",
    "bread",
    "smith",
    "baker",
    "castle",
    "tower",
    "door",
    "window",
    "wall",
    "map",
    "compass",
    "horse",
    "saddle",
    "boat",
]
SYLLABLES = [a + b for a in "bdfgklmnprstvz" for b in ("a", "e", "i", "o", "u", "ar", "en", "il", "on", "us")]


def short(rng: random.Random, _vocabulary: list[str]) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 24)))


def long(rng: random.Random, vocabulary: list[str]) -> str:
    words = rng.sample(vocabulary, 1000)
    return " ".join(rng.choice(words) for _ in range(22 * 1024 // 8))


def entries(shape: str, count: int) -> list[Entry]:
    rng = random.Random(41)
    vocabulary = sorted({"".join(rng.choices(SYLLABLES, k=4)) for _ in range(4000)})
    make = short if shape == "short" else long
    out = []
    for n in range(count):
        text = make(rng, vocabulary)
        out.append(
            Entry(
                ref=ConversationRef("writes", "session", f"p{n % 20}", "main"),
                entry_id=f"x{n}.a",
                store_id=f"threads:0:{n}",
                seq=n,
                exchange_id=f"x{n}",
                role="answer",
                occurred_at=n,
                text=text,
                original=None,
                subject=f"p{n % 20}",
                agent="a",
                terms=index_terms(text),
            )
        )
    return out


async def archive(client: AsyncMongoClient[dict[str, Any]], batch: list[Entry], postings: bool) -> float:
    database = client[f"bench_postings_{uuid.uuid4().hex[:8]}"]
    try:
        store = MongoConversationArchive(database)
        await store.prepare()
        await MongoArchiveSearch(database).prepare()
        if not postings:

            async def nothing(_: object) -> None:
                return None

            store._postings.post = nothing  # type: ignore[method-assign]
        started = time.perf_counter()
        for start in range(0, len(batch), 20):
            await store.insert_entries(batch[start : start + 20])
        return time.perf_counter() - started
    finally:
        await client.drop_database(database.name)


async def run(mongo: str, rounds: int) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo)
    for shape, count in (("short", 1000), ("long", 60)):
        batch = entries(shape, count)
        seconds: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(rounds):
            for postings in (True, False):
                seconds[postings].append(await archive(client, batch, postings))
        with_, without = statistics.median(seconds[True]), statistics.median(seconds[False])
        print(
            f"{shape}: {count} entries, with postings {with_:.2f} s, without {without:.2f} s "
            f"(medians of {rounds}); ratio {with_ / without:.2f}",
            flush=True,
        )
    await client.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mongo", default="mongodb://127.0.0.1:27017/?directConnection=true")
    args = parser.parse_args(argv)
    asyncio.run(run(args.mongo, args.rounds))


if __name__ == "__main__":
    sys.exit(main())
