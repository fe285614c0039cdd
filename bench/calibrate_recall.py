"""Fit recall's calibration (projections/recall.py) on one part of the evaluation sets, and report on
the other: the split is by tenant, so no tenant's facts sit on both sides (FIT_TENANTS and REPORT_TENANTS
of tests/evaluation/recall_scoring.py; recall_eval.json counts as one tenant of the fitted side).

For every question of the fitted side, every fact the asker may see is a row: its cosine with the
question (local all-MiniLM-L6-v2), its lexical score, their gaps to the best candidate's, and whether
it is one of the question's expected facts. A logistic regression over them gives the semantic
calibration, one over the lexical signals alone the keyword-only one. Then, with the pure ranking the
service runs, both sides are printed (in sample and out of sample): recall@5 of the facts the agent
receives, per kind, compound questions (tests/evaluation/recall_scoring.compound_questions: both
parts among the five), leaks, the plain-cosine ceiling, and the curve of the floor (the share of
answerable questions with an expected fact labelled `bears`, the share of unanswerable ones with none
labelled).
The questions and the ranking's evaluation are in tests/evaluation/recall_ranking.py (the evaluation test
uses them too). No I/O but the fixture files; run: python -m bench.calibrate_recall
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from memlog.adapters.embeddings import LocalMiniLM
from projections.recall import (
    Calibration,
    Rarity,
    RecallPolicy,
    lexical_score,
)
from projections.words import index_terms
from tests.evaluation.recall_ranking import Cosines, Question, evaluate, questions, similarities
from tests.evaluation.recall_scoring import FIT_TENANTS, REPORT_TENANTS

FLOORS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9)


def fit(features: np.ndarray, labels: np.ndarray, l2: float = 1e-3) -> np.ndarray:
    """Logistic regression by Newton's method; the last weight is the bias."""
    x = np.hstack([features, np.ones((len(features), 1))])
    w = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-(x @ w)))
        gradient = x.T @ (p - labels) + l2 * w
        hessian = (x.T * (p * (1 - p))) @ x + l2 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def calibrations(qs: Sequence[Question], sims: Sequence[Cosines]) -> tuple[Calibration, Calibration]:
    """The semantic and keyword-only calibrations fitted on these questions (compound ones left out)."""
    rows, labels, lexical_only = [], [], []
    for q, cosines in zip(qs, sims, strict=True):
        if q.every:
            continue
        rarity = Rarity.of(q.pool)
        query = index_terms(q.text)
        sim = cosines[q.text]
        lexical = [lexical_score(index_terms(fact.text), query, rarity) for fact, _ in q.pool]
        best_cosine, best_lexical = max(sim.values(), default=0.0), max(lexical, default=0.0)
        for (fact, _), words in zip(q.pool, lexical, strict=True):
            cosine = sim[fact.fact_id]
            rows.append([cosine, words, cosine - best_cosine, words - best_lexical])
            lexical_only.append([words, words - best_lexical])
            labels.append(1.0 if fact.fact_id in q.expected else 0.0)
    y = np.asarray(labels)
    w = [round(float(v), 3) for v in fit(np.asarray(rows), y)]
    k = [round(float(v), 3) for v in fit(np.asarray(lexical_only), y)]
    semantic = Calibration(cosine=w[0], lexical=w[1], cosine_gap=w[2], lexical_gap=w[3], bias=w[4])
    keyword = Calibration(cosine=0.0, lexical=k[0], cosine_gap=0.0, lexical_gap=k[1], bias=k[2])
    print(f"fitted on {len(qs)} questions of {sorted(FIT_TENANTS)}: {len(y)} rows ({int(y.sum())} relevant)")
    return semantic, keyword


def main() -> None:
    qs = questions()
    sims = similarities(qs, LocalMiniLM())
    sides = {
        "in sample": [n for n, q in enumerate(qs) if q.tenant in FIT_TENANTS],
        "out of sample": [n for n, q in enumerate(qs) if q.tenant in REPORT_TENANTS],
    }
    semantic, keyword = calibrations([qs[n] for n in sides["in sample"]], [sims[n] for n in sides["in sample"]])
    print(f"semantic: {semantic}\nlexical:  {keyword}")
    default = RecallPolicy(semantic=semantic, lexical=keyword)
    for side, chosen in sides.items():
        side_qs = [qs[n] for n in chosen]
        print(f"\n{side} ({len(side_qs)} questions), floor {default.floor}:")
        print(f"  embeddings {_fmt(evaluate(side_qs, [sims[n] for n in chosen], default))}")
        print(f"  keyword    {_fmt(evaluate(side_qs, [None] * len(side_qs), default))}")
        print("  the floor's curve (embeddings): floor, answerable labelled bears, unanswerable with none labelled")
        for floor in FLOORS:
            result = evaluate(
                side_qs, [sims[n] for n in chosen], RecallPolicy(floor=floor, semantic=semantic, lexical=keyword)
            )
            print(f"    {floor:.2f}  {result['labelled_bears']:.3f}  {result['unanswerable_none_bears']:.3f}")


def _fmt(result: Mapping[str, float]) -> str:
    return "  ".join(f"{k} {v:.3f}" if k != "leaks" else f"leaks {int(v)}" for k, v in result.items())


if __name__ == "__main__":
    main()
