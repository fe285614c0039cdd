"""Fit recall's calibration (projections/recall.py) and choose its floor, from the evaluation sets.

For every question, every fact the asker may see is a row: its cosine with the question (local
all-MiniLM-L6-v2), its lexical score, and whether it is one of the question's expected facts. A
logistic regression over (cosine, lexical) gives the semantic calibration, one over (lexical) alone
the keyword-only one; then recall@5 and the share of unanswerable questions left with no claimed
match are printed for a range of floors, with the pure ranking the service runs. No I/O but the
fixture files; run: python -m bench.calibrate_recall [--apply PATH.json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adapters.embeddings import LocalMiniLM
from projections.facts import Fact, SubjectFacts
from projections.recall import Calibration, Rarity, RecallPolicy, candidates, lexical_score, rank
from projections.words import index_terms

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
NOW = 1_795_000_000_000


@dataclass
class Question:
    text: str
    pool: list[tuple[Fact, str]]
    expected: set[str]
    forbidden: set[str]
    kind: str
    source: str


def _fact(fact_id: str, text: str, scope: str, agent: str | None, order: int) -> Fact:
    return Fact(fact_id, scope, agent, text, "subject", NOW + order, NOW + order, index_terms(text))


def load_v1(path: Path) -> Iterator[Question]:
    """recall_eval.json: facts of 5 subjects, each question expecting one fact of its subject."""
    data = json.loads(path.read_text())
    held: dict[str, list[Fact]] = {}
    for order, fact in enumerate(data["facts"]):
        held.setdefault(fact["subject"], []).append(_fact(fact["id"], fact["text"], "shared", None, order))
    for question in data["questions"]:
        state = SubjectFacts(tuple(held[question["subject"]]), NOW, NOW + 10**12)
        pool = candidates(state, None, agent=None, now_ms=NOW)
        yield Question(question["text"], pool, {question["expected"]}, set(), question["kind"], path.name)


def load_v2(path: Path) -> Iterator[Question]:
    """recall_heldout.json: tenants with agents, subject facts and tenant knowledge."""
    data = json.loads(path.read_text())
    order = 0
    subjects: dict[tuple[str, str], list[Fact]] = {}
    knowledge: dict[str, list[Fact]] = {}
    for tenant in data["tenants"]:
        name = tenant["tenant"]
        for fact in tenant["tenant_facts"]:
            knowledge.setdefault(name, []).append(_fact(fact["id"], fact["text"], fact["scope"], fact["agent"], order))
            order += 1
        for fact in tenant["subject_facts"]:
            subjects.setdefault((name, fact["subject"]), []).append(
                _fact(fact["id"], fact["text"], fact["scope"], fact["agent"], order)
            )
            order += 1
    for q in data["questions"]:
        own = SubjectFacts(tuple(subjects.get((q["tenant"], q["subject"]), [])), NOW, NOW + 10**12)
        tenant_state = SubjectFacts(tuple(knowledge.get(q["tenant"], [])), NOW, NOW + 10**12)
        pool = candidates(own, tenant_state, agent=q["agent"], now_ms=NOW, shared_only=q["agent"] is None)
        yield Question(q["text"], pool, set(q["expected"]), set(q.get("forbidden", [])), q["kind"], path.name)


def questions() -> list[Question]:
    found = list(load_v1(FIXTURES / "recall_eval.json"))
    heldout = FIXTURES / "recall_heldout.json"
    if heldout.exists():
        found += list(load_v2(heldout))
    return found


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


def evaluate(qs: list[Question], sims: Sequence[Mapping[str, float] | None], policy: RecallPolicy) -> dict[str, float]:
    answered, empty, leaks = [], [], 0
    by_kind: dict[str, list[bool]] = {}
    for question, similarity in zip(qs, sims, strict=True):
        got = {hit.fact.fact_id for hit in rank(question.pool, question.text, policy, similarity)[: policy.limit]}
        leaks += bool(got & question.forbidden)
        if question.expected:
            hit = bool(got & question.expected)
            answered.append(hit)
            by_kind.setdefault(question.kind, []).append(hit)
        else:
            empty.append(not got)
            by_kind.setdefault(question.kind, []).append(not got)
    result = {
        "recall@5": sum(answered) / max(1, len(answered)),
        "nothing_claimed": sum(empty) / max(1, len(empty)),
        "leaks": float(leaks),
    }
    return result | {kind: sum(v) / len(v) for kind, v in sorted(by_kind.items())}


def similarities(qs: list[Question], model: LocalMiniLM) -> list[dict[str, float]]:
    """Each question's cosine with each candidate, as the service computes them."""
    texts = sorted({fact.text for q in qs for fact, _ in q.pool} | {q.text for q in qs})
    vectors = dict(zip(texts, model.encode(texts), strict=True))
    found = []
    for q in qs:
        qv = np.asarray(vectors[q.text])
        found.append({fact.fact_id: float(qv @ np.asarray(vectors[fact.text])) for fact, _ in q.pool})
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fit-on", default="all", help="all, or a fixture file name to fit on alone")
    args = parser.parse_args()
    qs = questions()
    sims = similarities(qs, LocalMiniLM())
    rows, labels, lexical_only = [], [], []
    for q, sim in zip(qs, sims, strict=True):
        rarity = Rarity.of(q.pool)
        query = index_terms(q.text)
        if args.fit_on != "all" and q.source != args.fit_on:
            continue
        lexical = [lexical_score(index_terms(fact.text), query, rarity) for fact, _ in q.pool]
        best_cosine, best_lexical = max(sim.values(), default=0.0), max(lexical, default=0.0)
        for (fact, _), words in zip(q.pool, lexical, strict=True):
            cosine = sim[fact.fact_id]
            rows.append([cosine, words, cosine - best_cosine, words - best_lexical])
            lexical_only.append([words, words - best_lexical])
            labels.append(1.0 if fact.fact_id in q.expected else 0.0)
    y = np.asarray(labels)
    w = [float(v) for v in fit(np.asarray(rows), y)]
    k = [float(v) for v in fit(np.asarray(lexical_only), y)]
    semantic = Calibration(cosine=w[0], lexical=w[1], cosine_gap=w[2], lexical_gap=w[3], bias=w[4])
    lexical = Calibration(cosine=0.0, lexical=k[0], cosine_gap=0.0, lexical_gap=k[1], bias=k[2])
    print(f"{len(qs)} questions, {len(y)} rows ({int(y.sum())} relevant)")
    print(f"semantic: {semantic}\nlexical:  {lexical}")
    kinds = sorted({q.source for q in qs})
    for floor in (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5):
        policy = RecallPolicy(floor=floor, semantic=semantic, lexical=lexical)
        for source in kinds:
            chosen = [(q, s) for q, s in zip(qs, sims, strict=True) if q.source == source]
            with_model = evaluate([q for q, _ in chosen], [s for _, s in chosen], policy)
            keyword = evaluate([q for q, _ in chosen], [None] * len(chosen), policy)
            print(f"floor {floor:.2f} {source:22} embeddings {_fmt(with_model)}")
            print(f"          {'':22} keyword    {_fmt(keyword)}")


def _fmt(result: dict[str, float]) -> str:
    return "  ".join(f"{k} {v:.3f}" if k != "leaks" else f"leaks {int(v)}" for k, v in result.items())


if __name__ == "__main__":
    main()
