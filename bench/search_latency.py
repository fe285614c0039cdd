"""Benchmark: where a search's time goes with vectors (issue 35's latency line), next to the raw MongoDB
candidate query of the same search in the same run. No assertions.

The shape of the issue: one agent answering in 10 threads of 300 exchanges each (3,000 exchanges, one
subject's session each), written straight through the store; each run's vector planted in its block
(`vector_blocks`) from a seeded generator, since a search's cost does not depend on the vectors'
values and e5 takes 0.1 to 0.3 s an exchange to encode (`--passages e5` encodes them for real). The
questions are natural-language ones, stop words in; the candidate query leaves them out (as memlog's
does). Each question is asked once (the question cache is never hit), interleaved after a warm-up:

- `raw thread`: the thread's snapshot read and its candidate query (bench/archives.py's floor);
- `thread words` / `thread e5`: the thread's search without and with vectors (history, 10 results,
  no neighbours, as bench/search_eval.py asks), ranking in the API's ranking processes;
- `raw agent`, `agent words`, `agent e5`: the same for the agent's search across its threads;
- the parts of an e5 search: the question's vector (`encode`), the scope's vectors (`vectors thread`,
  `vectors agent`; `groups thread`, `groups agent`: the read that gave them before `vector_blocks`, the
  scope's group documents, which SecantusDB reads whole whatever the projection), and the nearest
  read whole (`nearest thread`, `nearest agent`: vectors, encode in parallel, compare, the 40 nearest
  groups read).

    MEMLOG_HOME=... OMP_WAIT_POLICY=passive python -m bench.search_latency [--rounds 100] [--passages e5]

`MEMLOG_BENCH_LATENCY_NAMESPACE=<namespace>` keeps the archive in that namespace and measures again
without loading when it is there.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bench.projection import interleaved, on_local_stack, quantiles
from memlog.adapters.archive_vectors import pack
from memlog.adapters.mongo_archives import MongoConversationArchive
from memlog.adapters.mongo_entries import GROUPS, WITHOUT_TERMS
from memlog.adapters.mongo_search import CANDIDATE_FIELDS, MongoArchiveSearch
from memlog.app.conversations import Conversations
from memlog.app.search import CrossSearch
from memlog.config.settings import Settings
from memlog.services import open_services
from projections.archives import ConversationRef, Entry, index_terms
from projections.relevance import query_of

THREADS, EXCHANGES, AGENT, TENANT = 10, 300, "guide", "latency"
T0 = 1_795_000_000_000
SYLLABLES = ("ka lo mi ne ru sa te vo bri dan fel gor hum jin kes lun mar nor pel quin rast sol tor ven").split()  # noqa: SIM905
ASKING = [
    "where did I put the {} and the {}?",
    "what did you say about the {} near the {}?",
    "when was the {} moved to the {}?",
    "do you remember the {} we found by the {}?",
    "how many {} did I leave in the {}?",
    "who told me about the {} and the {}?",
]


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))))
    return sorted(words)


def zipf(rng: random.Random, words: Sequence[str], count: int) -> list[str]:
    """`count` words of a Zipf-like frequency (rank r with weight 1/r): some common, most rare."""
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    return rng.choices(words, weights=weights, k=count)


def entries(rng: random.Random, words: Sequence[str]) -> list[Entry]:
    """The 10 threads' exchanges, a question and an answer each, in the log's order per thread."""
    out = []
    number = 0
    for thread in range(THREADS):
        subject = f"player-{thread:02d}"
        ref = ConversationRef(TENANT, "session", subject, "main")
        for n in range(EXCHANGES):
            for role in ("question", "answer"):
                picked = zipf(rng, words, rng.randint(6, 30))
                text = ("I think " if role == "answer" else "Tell me, ") + " the ".join(picked) + "."
                out.append(
                    Entry(
                        ref=ref,
                        entry_id=f"x{n}.{role[0]}",
                        store_id=f"threads:{thread}:{number}",
                        seq=number,
                        exchange_id=f"x{n}",
                        role=role,
                        occurred_at=T0 + number * 1000,
                        text=text,
                        original=None,
                        subject=subject,
                        agent=AGENT,
                        terms=index_terms(text),
                    )
                )
                number += 1
    return out


async def load(database: Any, settings: Settings, rng: random.Random, words: Sequence[str], passages: str) -> float:
    """The archive written, each run's vector in its block; seconds taken."""
    started = time.perf_counter()
    loader = MongoConversationArchive(database)  # no model: the vectors are planted below
    await loader.prepare()
    written = entries(rng, words)
    for start in range(0, len(written), 2 * EXCHANGES):
        await loader.insert_entries(written[start : start + 2 * EXCHANGES])
    firsts = [e for e in written if e.role == "question"]
    if passages == "e5":
        from memlog.adapters.archive_vectors import ArchiveVectors

        model = ArchiveVectors("e5", settings.embeddings_threads)
        texts = [f"{q.text}\n{a.text}" for q, a in zip(firsts, [e for e in written if e.role == "answer"], strict=True)]
        vectors = [
            blob for start in range(0, len(texts), 64) for blob in await model.passages(texts[start : start + 64])
        ]
    else:
        vectors = [pack([rng.gauss(0.0, 1.0) for _ in range(384)]) for _ in firsts]
    placed = []  # the runs' first entries as stored (with their places), by store id
    for thread in range(THREADS):
        ref = ConversationRef(TENANT, "session", f"player-{thread:02d}", "main")
        placed += [
            e for e in await loader.entries(ref, scope="history", snapshot=2**62, limit=10**6) if e.role == "question"
        ]
    by_id = {e.store_id: e for e in placed}
    await loader._vector_blocks.put(
        (by_id[q.store_id], q.store_id, blob) for q, blob in zip(firsts, vectors, strict=True)
    )
    return time.perf_counter() - started


def questions(rng: random.Random, words: Sequence[str], count: int) -> list[str]:
    return [rng.choice(ASKING).format(*zipf(rng, words[:600], 2)) + f" ({i})" for i in range(count)]


async def main(settings: Settings, rounds: int, passages: str) -> None:
    rng = random.Random(35)
    kept = os.environ.get("MEMLOG_BENCH_LATENCY_NAMESPACE")
    settings = settings.model_copy(update={"search_vectors": "e5", **({"namespace": kept} if kept else {})})
    words = vocabulary(rng)
    async with open_services(settings) as services:
        store = services.conversations
        assert isinstance(store, MongoConversationArchive)
        await services.current.prepare()
        database = services.database
        loaded = await database[GROUPS].count_documents({"tenant": TENANT}) if kept else 0
        load_s = await load(database, settings, rng, words, passages) if not loaded else 0.0
        print(
            f"namespace {settings.namespace}: {THREADS} threads x {EXCHANGES} exchanges of agent {AGENT!r}"
            + (f", loaded in {load_s:.0f} s" if load_s else " (loaded before)"),
            flush=True,
        )
        e5 = services.threads(read_only=True)
        words_only = Conversations(
            store,
            None,
            "bench",
            evidence=services.evidence,
            similar=None,
            cursors=services.cursors,
            ranker=services.ranker,
        )
        across = services.cross_search
        across_words = CrossSearch(
            services.archive_search,
            store,
            services.archive_checkpoints,
            settings.search_max_candidates,
            cursors=services.cursors,
            ranker=services.ranker,
        )
        vectors = store._vectors
        assert vectors is not None
        asked = {name: questions(rng, words, rounds + 1) for name in ("thread", "agent", "encode", "nt", "na")}
        owners = [f"player-{rng.randrange(THREADS):02d}" for _ in range(rounds + 1)]
        groups = services.database[GROUPS]

        def thread_search(uses: Conversations, name: str) -> Callable[[int], Awaitable[Any]]:
            async def call(i: int) -> Any:
                return await uses.search(
                    TENANT, "session", owners[i], asked[name][i], scope="history", limit=10, radius=0
                )

            return call

        def agent_search(uses: CrossSearch, name: str) -> Callable[[int], Awaitable[Any]]:
            async def call(i: int) -> Any:
                return await uses.agent(TENANT, AGENT, asked[name][i], limit=10, radius=0)

            return call

        async def raw_thread(i: int) -> Any:
            await e5.snapshot(TENANT, "session", owners[i])
            found = store.candidate_query(
                TENANT, "session", owners[i], query_of(asked["thread"][i]).lookup, conversation=None
            )
            return await groups.find(found, WITHOUT_TERMS).to_list()

        async def raw_agent(i: int) -> Any:
            found = MongoArchiveSearch.across_query(TENANT, query_of(asked["agent"][i]).lookup, agent=AGENT)
            return await groups.find(found, CANDIDATE_FIELDS).to_list()

        async def encode(i: int) -> Any:
            return await vectors.question(asked["encode"][i])

        async def vectors_thread(i: int) -> Any:
            scope = {"tenant": TENANT, "thread": "session", "owner": owners[i]}
            return await store._vector_blocks.read(scope, vectors.scan, settings.search_max_time_ms)

        async def vectors_agent(_: int) -> Any:
            return await store._vector_blocks.read(
                {"tenant": TENANT, "agent": AGENT}, vectors.scan, settings.search_max_time_ms
            )

        async def before_thread(i: int) -> Any:  # the read before vector_blocks: the scope's groups, whole
            scope = {"tenant": TENANT, "thread": "session", "owner": owners[i]}
            return await groups.find(scope, {"v": 1}).limit(vectors.scan).to_list()

        async def before_agent(_: int) -> Any:
            return await groups.find({"tenant": TENANT, "agent": AGENT}, {"v": 1}).limit(vectors.scan).to_list()

        async def nearest_thread(i: int) -> Any:
            return await store.nearest(TENANT, asked["nt"][i], thread=("session", owners[i]), agent=None, limit=40)

        async def nearest_agent(i: int) -> Any:
            return await store.nearest(TENANT, asked["na"][i], thread=None, agent=AGENT, limit=40)

        calls = {
            "raw thread": raw_thread,
            "thread words": thread_search(words_only, "thread"),
            "thread e5": thread_search(e5, "thread"),
            "raw agent": raw_agent,
            "agent words": agent_search(across_words, "agent"),
            "agent e5": agent_search(across, "agent"),
            "encode": encode,
            "vectors thread": vectors_thread,
            "vectors agent": vectors_agent,
            "groups thread": before_thread,
            "groups agent": before_agent,
            "nearest thread": nearest_thread,
            "nearest agent": nearest_agent,
        }
        load_before = os.getloadavg()
        taken = await interleaved(list(calls.values()), rounds)
        report(dict(zip(calls, taken, strict=True)), load_before, os.getloadavg(), rounds)
        if not kept:
            await services.mongo.drop_database(settings.mongo_db_name)


def report(taken: dict[str, list[float]], before: tuple[float, ...], after: tuple[float, ...], rounds: int) -> None:
    print(
        f"{rounds} rounds, load average before {before[0]:.2f} / {before[1]:.2f}, after {after[0]:.2f} / {after[1]:.2f}"
    )
    cut = {name: quantiles(ms) for name, ms in taken.items()}
    for name, (p50, p99) in cut.items():
        print(f"  {name:16} p50 {p50:8.1f} ms   p99 {p99:8.1f} ms")
    for search, floor in (("thread", "raw thread"), ("agent", "raw agent")):
        for how in ("words", "e5"):
            p50, p99 = cut[f"{search} {how}"]
            print(f"  {search} {how:5} / {floor}: p50 {p50 / cut[floor][0]:5.2f}x   p99 {p99 / cut[floor][1]:5.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--passages", choices=("planted", "e5"), default="planted")
    args = parser.parse_args()
    on_local_stack(lambda settings: main(settings, args.rounds, args.passages))
