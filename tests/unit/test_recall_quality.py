"""Recall quality over a hand-written set: 100 facts of 5 subjects, 200 questions (100 sharing a word with
their fact, 100 paraphrases sharing none). recall@5 is reported for keyword-only and embedding recall;
no threshold is asserted: the numbers are for reading (they print in the test log)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.embeddings import LocalMiniLM
from projections.facts import Fact, SubjectFacts, index_terms
from projections.recall import RecallPolicy, candidates, cosine, rank

DATA = json.loads((Path(__file__).parents[1] / "fixtures" / "recall_eval.json").read_text())
NOW = 1_795_000_000_000
REPORT = Path(__file__).resolve().parents[2] / ".memlog-test" / "recall_eval.txt"


def subjects() -> dict[str, SubjectFacts]:
    held: dict[str, list[Fact]] = {}
    for order, fact in enumerate(DATA["facts"]):
        held.setdefault(fact["subject"], []).append(
            Fact(
                fact["id"], "shared", None, fact["text"], "subject", NOW + order, NOW + order, index_terms(fact["text"])
            )
        )
    return {name: SubjectFacts(tuple(facts), NOW, NOW + 10**12) for name, facts in held.items()}


def test_the_evaluation_set_is_well_formed() -> None:
    ids = {fact["id"] for fact in DATA["facts"]}
    assert len(DATA["facts"]) == 100 and len(ids) == 100
    assert len(DATA["questions"]) == 200
    assert all(q["expected"] in ids for q in DATA["questions"])
    assert {q["kind"] for q in DATA["questions"]} == {"lexical", "paraphrase"}


def recall_at_5(similar: bool, model: LocalMiniLM | None) -> dict[str, float]:
    held = subjects()
    vectors: dict[str, list[float]] = {}
    if model is not None:
        for fact, vector in zip(DATA["facts"], model.encode([f["text"] for f in DATA["facts"]]), strict=True):
            vectors[fact["id"]] = vector
        questions = model.encode([q["text"] for q in DATA["questions"]])
    hits: dict[str, list[bool]] = {"lexical": [], "paraphrase": []}
    for number, question in enumerate(DATA["questions"]):
        state = held[question["subject"]]
        similarity = None
        if similar and model is not None:
            similarity = {f.fact_id: cosine(questions[number], vectors[f.fact_id]) for f in state.facts}
        pool = candidates(state, None, agent=None, now_ms=NOW)
        found = rank(pool, question["text"], RecallPolicy(), similarity)[:5]
        assert len(found) <= 5
        hits[question["kind"]].append(question["expected"] in {hit.fact.fact_id for hit in found})
    every = hits["lexical"] + hits["paraphrase"]
    return {kind: sum(values) / len(values) for kind, values in {**hits, "all": every}.items()}


@pytest.mark.timeout(600)
def test_recall_at_5_is_reported_for_keywords_and_embeddings(capsys: pytest.CaptureFixture[str]) -> None:
    model = LocalMiniLM()
    keyword = recall_at_5(False, None)
    embedded = recall_at_5(True, model)
    lines = [
        "recall@5 over 200 questions (100 lexical, 100 paraphrases) and 100 facts of 5 subjects:",
        *(
            f"  {name:28} all {r['all']:.3f}   lexical {r['lexical']:.3f}   paraphrase {r['paraphrase']:.3f}"
            for name, r in [("keyword (token index, BM25)", keyword), ("embeddings (all-MiniLM-L6-v2)", embedded)]
        ),
    ]
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    # every question was scored; the quality itself is reported, not asserted
    assert 0.0 <= keyword["all"] <= 1.0 and 0.0 <= embedded["all"] <= 1.0
