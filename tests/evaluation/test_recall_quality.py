"""Recall quality out of sample, with the pure ranking the service runs and its default policy: on the
tenants the calibration was not fitted on (REPORT_TENANTS of tests/evaluation/recall_scoring.py: two
tenants of tests/fixtures/recall_heldout.json with agents, subject facts, tenant knowledge, unanswerable
questions, and compound questions made from the set). The figures print in the test log and are
written to .memlog-test/recall_eval.txt; the assertions hold the measured figures so a change that
lowers them fails (the model is deterministic: these are not timings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlog.adapters.embeddings import LocalMiniLM
from projections.recall import RecallPolicy
from tests.evaluation.recall_ranking import evaluate, questions, similarities
from tests.evaluation.recall_scoring import FIT_TENANTS, REPORT_TENANTS

REPORT = Path(__file__).resolve().parents[2] / ".memlog-test" / "recall_eval.txt"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_recall_quality_out_of_sample_with_and_without_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert not FIT_TENANTS & REPORT_TENANTS
    qs = [q for q in questions() if q.tenant in REPORT_TENANTS]
    sims = similarities(qs, LocalMiniLM())
    policy = RecallPolicy()
    with_model = evaluate(qs, sims, policy)
    keyword = evaluate(qs, [None] * len(qs), policy)
    lines = [f"recall quality out of sample ({len(qs)} questions), default policy (floor {policy.floor}):"]
    for mode, result in (("embeddings", with_model), ("keyword", keyword)):
        lines.append(f"  {mode:10} " + "  ".join(f"{k} {v:.3f}" for k, v in result.items()))
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert with_model["leaks"] == 0 and keyword["leaks"] == 0
    assert with_model["recall@5"] >= 0.97 and with_model["paraphrase"] >= 0.93 and with_model["tenant"] >= 0.99
    assert with_model["compound"] >= 0.91 and with_model["lexical"] >= 0.99
    assert with_model["labelled_bears"] >= 0.85 and with_model["unanswerable_none_bears"] >= 0.60
    assert keyword["lexical"] >= 0.99 and keyword["unanswerable_none_bears"] >= 0.96 and keyword["recall@5"] >= 0.76
