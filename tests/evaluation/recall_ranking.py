"""The pure ranking the service runs, over the evaluation sets (tests/fixtures/recall_eval.json and
recall_heldout.json with its compound questions): each question with the facts its asker may be given,
the model's cosines for them, and `evaluate`: recall@5 overall and per kind, compound questions, leaks,
and the share of questions whose facts are labelled `bears` as they should be.

Shared by tests/evaluation/test_recall_quality.py and `python -m bench.calibrate_recall` (which fits the
calibration on one side of the split and reports on both), so the test imports no `bench`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memlog.adapters.embeddings import LocalMiniLM
from projections.facts import Fact, SubjectFacts
from projections.recall import Part, RecallPolicy, candidates, clauses, combined, offer
from projections.words import index_terms
from tests.evaluation.recall_scoring import compound_questions

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NOW = 1_795_000_000_000
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
