"""Fit recall's calibration (projections/recall.py) on one part of the evaluation sets, and report on
the other: the split is by tenant, so no tenant's facts sit on both sides (bench/recall_eval.py's
FIT_TENANTS and REPORT_TENANTS; recall_eval.json counts as one tenant of the fitted side).

For every question of the fitted side, every fact the asker may see is a row: its cosine with the
question (local all-MiniLM-L6-v2), its lexical score, their gaps to the best candidate's, and whether
it is one of the question's expected facts. A logistic regression over them gives the semantic
calibration, one over the lexical signals alone the keyword-only one. Then, with the pure ranking the
service runs, both sides are printed (in sample and out of sample): recall@5 of the facts the agent
receives, per kind, compound questions (bench/recall_eval.compound_questions: both parts among the
five), leaks, the plain-cosine ceiling, and the curve of the floor (the share of answerable questions
with an expected fact labelled `bears`, the share of unanswerable ones with none labelled).
No I/O but the fixture files; run: python -m bench.calibrate_recall
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.recall_eval import FIT_TENANTS, REPORT_TENANTS, compound_questions
from memlog.adapters.embeddings import LocalMiniLM
from projections.facts import Fact, SubjectFacts
from projections.recall import (
    Calibration,
    Part,
    Rarity,
    RecallPolicy,
    candidates,
    clauses,
    combined,
    lexical_score,
    offer,
)
from projections.words import index_terms

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
NOW = 1_795_000_000_000
FLOORS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9)
V1_TENANT = "recall_eval"


@dataclass
class Question:
    text: str
    pool: list[tuple[Fact, str]]
    expected: set[str]
    forbidden: set[str]
    kind: str
    tenant: str
    every: bool = False  # a compound question: every expected fact must be among the five
    texts: list[str] = field(default_factory=list)  # the question and its clauses

    def __post_init__(self) -> None:
        self.texts = [self.text, *clauses(self.text)]


def _fact(fact_id: str, text: str, scope: str, agent: str | None, order: int) -> Fact:
    return Fact(fact_id, scope, agent, text, "subject", NOW + order, NOW + order, index_terms(text))


def load_v1(path: Path) -> Iterator[Question]:
    """recall_eval.json: facts of 5 subjects of one tenant, each question expecting one fact of its subject."""
    data = json.loads(path.read_text())
    held: dict[str, list[Fact]] = {}
    for order, fact in enumerate(data["facts"]):
        held.setdefault(fact["subject"], []).append(_fact(fact["id"], fact["text"], "shared", None, order))
    for question in data["questions"]:
        state = SubjectFacts(tuple(held[question["subject"]]), NOW, NOW + 10**12)
        pool = candidates(state, None, agent=None, now_ms=NOW)
        yield Question(question["text"], pool, {question["expected"]}, set(), question["kind"], V1_TENANT)


def load_v2(path: Path) -> Iterator[Question]:
    """recall_heldout.json: tenants with agents, subject facts and tenant knowledge; with its compound
    questions (two of a subject's questions joined by "and")."""
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
    for q in [*data["questions"], *compound_questions(data)]:
        own = SubjectFacts(tuple(subjects.get((q["tenant"], q["subject"]), [])), NOW, NOW + 10**12)
        tenant_state = SubjectFacts(tuple(knowledge.get(q["tenant"], [])), NOW, NOW + 10**12)
        pool = candidates(own, tenant_state, agent=q["agent"], now_ms=NOW, shared_only=q["agent"] is None)
        yield Question(
            q["text"], pool, set(q["expected"]), set(q["forbidden"]), q["kind"], q["tenant"], q.get("every", False)
        )


def questions() -> list[Question]:
    return [*load_v1(FIXTURES / "recall_eval.json"), *load_v2(FIXTURES / "recall_heldout.json")]


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


Cosines = dict[str, dict[str, float]]  # per text (question or clause): fact id -> cosine


def parts_of(question: Question, cosines: Cosines | None) -> list[Part]:
    return [(text, None if cosines is None else cosines[text]) for text in question.texts]


def evaluate(qs: Sequence[Question], sims: Sequence[Cosines | None], policy: RecallPolicy) -> dict[str, float]:
    """What the agent receives (the non-strict recall, first `limit`): recall@5 overall and per kind,
    compound questions with both parts found, leaks; and the labels: the share of answerable questions
    with an expected fact labelled bears, of unanswerable ones with none labelled."""
    answered, labelled, none_bears, leaks, ceiling = [], [], [], 0, []
    by_kind: dict[str, list[bool]] = {}
    for question, cosines in zip(qs, sims, strict=True):
        scored = combined(question.pool, parts_of(question, cosines), policy)
        given = offer(question.pool, scored, policy)[: policy.limit]
        got = {hit.fact.fact_id for hit in given}
        leaks += bool(got & question.forbidden)
        if not question.expected:
            none_bears.append(not any(hit.bears for hit in scored))
            continue
        hit = question.expected <= got if question.every else bool(got & question.expected)
        by_kind.setdefault(question.kind, []).append(hit)
        if question.every:
            continue
        answered.append(hit)
        labelled.append(any(h.bears and h.fact.fact_id in question.expected for h in scored))
        if cosines is not None:
            nearest = sorted(cosines[question.text].items(), key=lambda item: -item[1])[: policy.limit]
            ceiling.append(bool({fact_id for fact_id, _ in nearest} & question.expected))
    result = {
        "recall@5": _share(answered),
        "labelled_bears": _share(labelled),
        "unanswerable_none_bears": _share(none_bears),
        "leaks": float(leaks),
    }
    if ceiling:
        result["plain_cosine_ceiling"] = _share(ceiling)
    return result | {kind: _share(v) for kind, v in sorted(by_kind.items())}


def _share(values: Sequence[bool]) -> float:
    return sum(values) / max(1, len(values))


def similarities(qs: Sequence[Question], model: LocalMiniLM) -> list[Cosines]:
    """Each question's (and clause's) cosine with each candidate, as the service computes them."""
    texts = sorted({fact.text for q in qs for fact, _ in q.pool} | {text for q in qs for text in q.texts})
    vectors = dict(zip(texts, model.encode(texts), strict=True))
    found = []
    for q in qs:
        per_text = {}
        for text in q.texts:
            qv = np.asarray(vectors[text])
            per_text[text] = {fact.fact_id: float(qv @ np.asarray(vectors[fact.text])) for fact, _ in q.pool}
        found.append(per_text)
    return found


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
