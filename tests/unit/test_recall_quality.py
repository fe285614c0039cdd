"""Recall quality on the two evaluation sets, with the pure ranking the service runs and its default
policy: tests/fixtures/recall_eval.json (100 facts of 5 subjects, 200 questions, lexical and
paraphrases) and recall_heldout.json (3 tenants with agents, subject facts and tenant knowledge, 333
questions, 93 of them with nothing to find). The figures print in the test log and are written to
.memlog-test/recall_eval.txt; the assertions hold the measured figures so a change that lowers them
fails (the model is deterministic: these are not timings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.embeddings import LocalMiniLM
from bench.calibrate_recall import evaluate, questions, similarities
from projections.recall import RecallPolicy

REPORT = Path(__file__).resolve().parents[2] / ".memlog-test" / "recall_eval.txt"


@pytest.mark.timeout(600)
def test_recall_quality_on_both_sets_with_and_without_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    qs = questions()
    sims = similarities(qs, LocalMiniLM())
    policy = RecallPolicy()
    lines, results = [f"recall quality, default policy (floor {policy.floor}):"], {}
    for source in ("recall_eval.json", "recall_heldout.json"):
        chosen = [n for n, q in enumerate(qs) if q.source == source]
        for mode, sim in (("embeddings", [sims[n] for n in chosen]), ("keyword", [None] * len(chosen))):
            result = evaluate([qs[n] for n in chosen], sim, policy)
            results[(source, mode)] = result
            lines.append(f"  {source:20} {mode:10} " + "  ".join(f"{k} {v:.3f}" for k, v in result.items()))
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert all(result["leaks"] == 0 for result in results.values())
    heldout = results[("recall_heldout.json", "embeddings")]
    assert heldout["recall@5"] >= 0.85 and heldout["paraphrase"] >= 0.68 and heldout["nothing_claimed"] >= 0.50
    assert results[("recall_eval.json", "embeddings")]["recall@5"] >= 0.84
    keyword = results[("recall_heldout.json", "keyword")]
    assert keyword["lexical"] >= 0.98 and keyword["nothing_claimed"] >= 0.86
