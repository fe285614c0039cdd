"""The pure scoring of the recall evaluation (tests/evaluation/recall_scoring.py, which bench/recall_eval.py
uses): hits, nothing claimed, leaks, the subject-only restriction."""

from __future__ import annotations

import json
from pathlib import Path

from tests.evaluation.recall_scoring import compound_questions, fact_table, judge, restricted_to_subjects, score

DATA = json.loads((Path(__file__).parents[1] / "fixtures" / "recall_heldout.json").read_text())
FACTS = fact_table(DATA)


def question(**fields: object) -> dict[str, object]:
    base = {"tenant": "blockhaven", "subject": "kestrel", "agent": None, "text": "?", "expected": [], "forbidden": []}
    return {**base, "kind": "lexical", **fields}


def test_a_hit_is_an_expected_fact_among_the_first_five() -> None:
    q = question(expected=["bh.kes.01"])
    assert judge(q, ["bh.kes.02", "bh.kes.01"], FACTS)["hit"]
    assert not judge(q, ["bh.kes.02", "bh.kes.03", "bh.kes.04", "bh.kes.05", "bh.kes.09", "bh.kes.01"], FACTS)["hit"]
    assert judge(q, [], FACTS)["nothing_claimed"] is None


def test_nothing_claimed_only_when_nothing_is_returned() -> None:
    q = question(kind="unanswerable")
    assert judge(q, [], FACTS)["nothing_claimed"]
    assert not judge(q, ["bh.kes.02"], FACTS)["nothing_claimed"]


def test_leaks_are_facts_the_asker_may_not_see() -> None:
    by_builder = question(agent="builder")
    assert judge(by_builder, ["bh.kes.06", "bh.T09", "bh.T01"], FACTS)["leaked"] == []
    by_guide = question(agent="guide", forbidden=["bh.kes.06"])
    outcome = judge(by_guide, ["bh.kes.06", "bh.tom.01", "ac.T01", "bh.T07", "unknown:x"], FACTS)
    assert outcome["forbidden_returned"] == ["bh.kes.06"]
    assert outcome["leaked"] == ["bh.kes.06", "bh.tom.01", "ac.T01", "bh.T07", "unknown:x"]
    assert judge(question(), ["bh.kes.06"], FACTS)["leaked"] == ["bh.kes.06"]  # no agent: shared only


def test_score_aggregates_per_kind() -> None:
    questions = [question(expected=["bh.kes.01"]), question(kind="unanswerable", agent="guide")]
    results = [
        {"returned": ["bh.kes.01"], "latency_ms": 2.0, "tool_returned": None},
        {"returned": [], "latency_ms": 4.0, "tool_returned": ["bh.kes.02"]},
    ]
    scored = score(questions, results, FACTS)
    assert scored["by_kind"]["lexical"]["recall_at_5"] == 1.0
    assert scored["by_kind"]["unanswerable"]["nothing_claimed"] == 1.0
    assert scored["overall"]["tool_differs"] == 1 and scored["overall"]["tool_compared"] == 1
    assert scored["overall"]["p50_ms"] == 3.0 and scored["overall"]["leaks"] == 0


def test_subject_only_drops_tenant_facts_and_the_questions_that_need_them() -> None:
    data, kept = restricted_to_subjects(DATA)
    assert all(not t["tenant_facts"] for t in data["tenants"])
    assert not any(q["kind"] == "tenant" for q in kept)
    assert all(not any(".T" in i for i in q["expected"] + q["forbidden"]) for q in kept)
    assert len(kept) < len(DATA["questions"])


def test_nothing_claimed_reads_the_bears_labels_and_a_compound_question_needs_both_parts() -> None:
    q = question(kind="unanswerable")
    assert judge(q, ["bh.kes.02"], FACTS, bearing=[])["nothing_claimed"]
    assert not judge(q, ["bh.kes.02"], FACTS, bearing=["bh.kes.02"])["nothing_claimed"]
    both = question(expected=["bh.kes.01", "bh.kes.02"], every=True)
    assert judge(both, ["bh.kes.02", "bh.kes.01"], FACTS)["hit"]
    assert not judge(both, ["bh.kes.02", "bh.kes.03"], FACTS)["hit"]


def test_compound_questions_join_two_of_a_subjects_questions() -> None:
    made = compound_questions(DATA)
    assert made and all(q["kind"] == "compound" and q["every"] and len(q["expected"]) == 2 for q in made)
    assert all(" and " in q["text"] and q["expected"][0] != q["expected"][1] for q in made)
