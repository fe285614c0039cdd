"""Benchmark: archive search latency (p50 / p99) over 1,000,000 archived entries across 10,000 threads,
next to the raw MongoDB query the search issues, in the same run: per thread, and across an agent's
threads (each agent answers in 100 threads). No assertions.

`MEMLOG_BENCH_ARCHIVE_ENTRIES` / `_THREADS` make it smaller for a quick look (e.g. 20,000 / 200: each
agent still answers in 100 threads of 100 entries); the entries are written in bulk straight through
the store (SecantusDB takes tens of minutes for a million). `MEMLOG_BENCH_ARCHIVE_NAMESPACE=<namespace>`
keeps the entries in that namespace and measures again without loading when they are there already.
Every latency pair is interleaved (raw, memlog, raw, ...), after a warm-up, so the machine's noise falls
on both alike.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from pymongo.errors import PyMongoError

from bench.projection import interleaved, on_local_stack, quantiles
from memlog.adapters.mongo_entries import GROUPS, WITHOUT_TERMS
from memlog.adapters.mongo_search import CANDIDATE_FIELDS, MongoArchiveSearch
from memlog.app.conversations import Conversations
from memlog.config.settings import Settings
from memlog.services import open_services
from projections.archives import ConversationRef, Entry, index_terms
from projections.relevance import query_of

ENTRIES = int(os.environ.get("MEMLOG_BENCH_ARCHIVE_ENTRIES", "1000000"))
THREADS = int(os.environ.get("MEMLOG_BENCH_ARCHIVE_THREADS", "10000"))
AGENTS = max(1, THREADS // 100)  # each agent answers in 100 threads
QUERIES = 300
ACROSS_QUERIES = int(os.environ.get("MEMLOG_BENCH_ARCHIVE_ACROSS_QUERIES", "300"))  # each reads ~6,000 entries
BULK = 5_000
WORDS = [
    *[
        "chest",
        "diamond",
        "pickaxe",
        "torch",
        "gate",
        "village",
        "iron",
        "gold",
        "redstone",
        "furnace",
        "farm",
        "wheat",
        "sheep",
        "bridge",
        "river",
        "cave",
    ],
    *[
        "nether",
        "portal",
        "obsidian",
        "lava",
        "water",
        "boat",
        "horse",
        "saddle",
        "map",
        "compass",
        "bed",
        "door",
        "window",
        "wall",
        "tower",
        "castle",
    ],
]
T0 = 1_795_000_000_000


def entry(rng: random.Random, number: int) -> Entry:
    per_thread = ENTRIES // THREADS
    thread, seq = divmod(number, per_thread)  # a thread's entries together, as one partition's log holds them
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 24)))
    role = "question" if seq % 2 == 0 else "answer"
    return Entry(
        ref=ConversationRef("bench", "session", f"player-{thread:05d}", "main" if seq < per_thread * 4 // 5 else "old"),
        entry_id=f"x{seq // 2}.{'q' if role == 'question' else 'a'}",
        store_id=f"threads:{thread % 6}:{number}",
        seq=number,
        exchange_id=f"x{seq // 2}",
        role=role,
        occurred_at=T0 + number,
        text=text,
        original=None,
        subject=f"player-{thread:05d}",
        agent=f"agent-{thread % AGENTS:03d}",
        reset_at=number + 1 if seq >= per_thread * 4 // 5 else 2**62,  # a fifth sits in a reset archive
        terms=index_terms(text),
    )


async def main(settings: Settings) -> None:
    rng = random.Random(7)
    kept = os.environ.get("MEMLOG_BENCH_ARCHIVE_NAMESPACE")  # reuse (and keep) entries a run loaded there
    if kept:
        settings = settings.model_copy(update={"namespace": kept})
    async with open_services(settings) as services:
        store = services.conversations
        await services.current.prepare()  # the archive's indexes and the search across threads'
        started = time.perf_counter()
        loaded = await services.database[GROUPS].estimated_document_count() if kept else 0
        for start in range(0, ENTRIES if loaded < ENTRIES else 0, BULK):
            await store.insert_entries([entry(rng, n) for n in range(start, min(start + BULK, ENTRIES))])
            if start % 100_000 == 0:
                print(f"  loaded {start:,} entries, {time.perf_counter() - started:.0f} s", flush=True)
        load_s = time.perf_counter() - started if loaded < ENTRIES else 0.0
        how = "loaded before" if loaded >= ENTRIES else "loaded now"
        print(f"  namespace {settings.namespace}: {ENTRIES:,} entries ({how})")
        conversations = Conversations(store, None, "bench", cursors=services.cursors)
        owners = [f"player-{rng.randrange(THREADS):05d}" for _ in range(QUERIES + 1)]
        queries = [f"{rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(QUERIES + 1)]
        raw_entries = services.database[GROUPS]

        async def search(i: int) -> Any:
            return await conversations.search("bench", "session", owners[i], queries[i], scope="history", limit=20)

        async def bare(i: int) -> Any:  # the same search without neighbours: what the neighbour reads add
            return await conversations.search(
                "bench", "session", owners[i], queries[i], scope="history", limit=20, radius=0
            )

        async def raw(i: int) -> Any:
            await conversations.snapshot("bench", "session", owners[i])
            filter_ = store.candidate_query(
                "bench", "session", owners[i], query_of(queries[i]).lookup, conversation=None
            )
            return await raw_entries.find(filter_, WITHOUT_TERMS).to_list()

        raw_ms, search_ms, bare_ms = await interleaved([raw, search, bare], QUERIES)
        example = store.candidate_query("bench", "session", owners[0], query_of(queries[0]).lookup, conversation=None)
        report(load_s, example, raw_ms, search_ms, bare_ms)
        await across(services, queries, rng)
        if kept:
            return
        try:
            await services.mongo.drop_database(settings.mongo_db_name)
        except PyMongoError as exc:  # dropping a million documents can outlast the client's patience
            print(f"(the benchmark database {settings.mongo_db_name} was not dropped: {exc})")


async def across(services: Any, queries: list[str], rng: random.Random) -> None:
    """An agent's search across its threads (history, 20 results, one neighbour), next to its raw query."""
    agents = [f"agent-{rng.randrange(AGENTS):03d}" for _ in queries]
    entries = services.database[GROUPS]

    async def search(i: int) -> Any:
        return await services.cross_search.agent("bench", agents[i], queries[i], limit=20)

    async def raw(i: int) -> Any:
        filter_ = MongoArchiveSearch.across_query("bench", query_of(queries[i]).lookup, agent=agents[i])
        return await entries.find(filter_, CANDIDATE_FIELDS).to_list()

    example = MongoArchiveSearch.across_query("bench", query_of(queries[0]).lookup, agent=agents[0])
    candidates = len(await entries.find(example, CANDIDATE_FIELDS).to_list())
    raw_ms, search_ms = await interleaved([raw, search], ACROSS_QUERIES)
    raw_p50, raw_p99 = quantiles(raw_ms)
    p50, p99 = quantiles(search_ms)
    print(f"\nacross an agent's threads ({AGENTS:,} agents, 100 threads each; {candidates:,} candidates for the first)")
    print(f"raw query: {GROUPS}.find({example}, {CANDIDATE_FIELDS})")
    print(f"  {'raw MongoDB candidate query':40} p50 {raw_p50:8.2f} ms   p99 {raw_p99:8.2f} ms")
    print(f"  {'memlog agent search (across threads)':40} p50 {p50:8.2f} ms   p99 {p99:8.2f} ms")
    print(f"  ratio, search / raw: p50 {p50 / raw_p50:.2f}, p99 {p99 / raw_p99:.2f}")


def report(
    load_s: float, example: dict[str, Any], raw_ms: list[float], search_ms: list[float], bare_ms: list[float]
) -> None:
    raw_p50, raw_p99 = quantiles(raw_ms)
    p50, p99 = quantiles(search_ms)
    bare_p50, bare_p99 = quantiles(bare_ms)
    loading = f", loaded in {load_s:.0f} s ({ENTRIES / load_s:,.0f} entries/s, bulk of {BULK:,})" if load_s else ""
    print(f"\n{ENTRIES:,} archived entries across {THREADS:,} threads{loading}")
    print(f"raw query: {GROUPS}.find({example}) plus the snapshot read of the thread's conversations")
    print(f"  {'raw MongoDB candidate query':40} p50 {raw_p50:8.2f} ms   p99 {raw_p99:8.2f} ms")
    print(f"  {'memlog search (query, match, rank, neighbours)':40} p50 {p50:8.2f} ms   p99 {p99:8.2f} ms")
    print(f"  ratio, search / raw: p50 {p50 / raw_p50:.2f}, p99 {p99 / raw_p99:.2f}")
    print(f"  {'memlog search without neighbours':40} p50 {bare_p50:8.2f} ms   p99 {bare_p99:8.2f} ms")
    print(f"  ratio, search without neighbours / raw: p50 {bare_p50 / raw_p50:.2f}, p99 {bare_p99 / raw_p99:.2f}")


if __name__ == "__main__":
    on_local_stack(main)
