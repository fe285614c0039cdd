"""The pure scoring of the recall evaluation (no I/O): which facts an asker may be given, the compound
questions made from the held-out set (tests/fixtures/recall_heldout.json), one question's outcome and the
aggregates; and the split of the set's tenants between the calibration's fit and the report.

Shared by the evaluation tests (tests/evaluation) and the harnesses `python -m bench.recall_eval` (through
the HTTP API) and `python -m bench.calibrate_recall` (the pure ranking), so the tests import no `bench`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

K = 5
# Recall's calibration is fitted on these tenants (bench/calibrate_recall.py; recall_eval.json is one
# tenant of its own there) and reported on the others: no tenant's facts on both sides.
FIT_TENANTS = frozenset({"recall_eval", "blockhaven"})
REPORT_TENANTS = frozenset({"acme-helpdesk", "greenplate"})


def visible(fact: Mapping[str, Any], question: Mapping[str, Any]) -> bool:
    """Whether the asker may be given the fact. `fact` carries tenant, subject (None for a tenant fact),
    scope and agent; the tenant and subject are the set's names (no run suffix)."""
    if fact["tenant"] != question["tenant"]:
        return False
    if fact["subject"] is not None and fact["subject"] != question["subject"]:
        return False
    return fact["scope"] == "shared" or (question["agent"] is not None and fact["agent"] == question["agent"])


def compound_questions(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Questions of two parts, made from the set: a subject's lexical and paraphrase questions asked by
    the same agent, taken two by two in the set's order, joined by "and" ("Where is my base and what
    do I owe the guild?"); both expected facts must be among the first five (`every`)."""
    groups: dict[tuple[str, str, str | None], list[Mapping[str, Any]]] = {}
    for q in data["questions"]:
        if q["kind"] in ("lexical", "paraphrase") and len(q["expected"]) == 1:
            groups.setdefault((q["tenant"], q["subject"], q["agent"]), []).append(q)
    made = []
    for (tenant, subject, agent), asked in groups.items():
        for first, second in zip(asked[::2], asked[1::2], strict=False):
            if first["expected"] == second["expected"]:
                continue
            text = first["text"].rstrip(" ?.") + " and " + second["text"][:1].lower() + second["text"][1:]
            made.append(
                {
                    "tenant": tenant,
                    "subject": subject,
                    "agent": agent,
                    "text": text,
                    "expected": first["expected"] + second["expected"],
                    "forbidden": first["forbidden"] + second["forbidden"],
                    "kind": "compound",
                    "every": True,
                }
            )
    return made


def judge(
    question: Mapping[str, Any],
    returned: Sequence[str],
    facts: Mapping[str, Mapping[str, Any]],
    bearing: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One question's outcome. `returned`: the set's ids of the facts returned, best first; an id the
    set does not know (a fact memlog returned that this run never wrote) counts as a leak. `bearing`:
    those labelled `bears` (None: every one returned is taken to be claimed). A compound question
    (`every`) is a hit when all its expected facts are among the first five."""
    expected = set(question["expected"])
    top = list(returned[:K])
    leaked = [fid for fid in returned if fid not in facts or not visible(facts[fid], question)]
    claimed = returned if bearing is None else bearing
    hit = expected <= set(top) if question.get("every") else bool(expected & set(top))
    return {
        "answerable": bool(expected),
        "hit": hit if expected else None,
        "nothing_claimed": (not claimed) if not expected else None,
        "forbidden_returned": [fid for fid in returned if fid in set(question["forbidden"])],
        "leaked": leaked,
        "returned": len(returned),
    }


def _percentile(samples: Sequence[float], share: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered)) - 1))]


def summarize(outcomes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Aggregate of judged questions (each with `latency_ms` and `tool_same` beside judge's fields)."""
    rows = list(outcomes)
    answerable = [r for r in rows if r["answerable"]]
    empty = [r for r in rows if not r["answerable"]]
    latencies = [r["latency_ms"] for r in rows if r.get("latency_ms") is not None]
    compared = [r for r in rows if r.get("tool_same") is not None]
    return {
        "questions": len(rows),
        "answerable": len(answerable),
        "recall_at_5": sum(r["hit"] for r in answerable) / len(answerable) if answerable else None,
        "unanswerable": len(empty),
        "nothing_claimed": sum(r["nothing_claimed"] for r in empty) / len(empty) if empty else None,
        "forbidden_returned": sum(bool(r["forbidden_returned"]) for r in rows),
        "leaks": sum(bool(r["leaked"]) for r in rows),
        "mean_returned": statistics.fmean(r["returned"] for r in rows) if rows else None,
        "p50_ms": statistics.median(latencies) if latencies else None,
        "p99_ms": _percentile(latencies, 0.99),
        "tool_compared": len(compared),
        "tool_differs": sum(not r["tool_same"] for r in compared),
    }


def score(
    questions: Sequence[Mapping[str, Any]],
    results: Sequence[Mapping[str, Any]],
    facts: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Per-question outcomes, per-kind and overall aggregates. `results[i]` answers `questions[i]`:
    {"returned": [set ids, best first], "latency_ms": float | None, "tool_returned": [ids] | None}."""
    per_question = []
    for question, result in zip(questions, results, strict=True):
        outcome = judge(question, result["returned"], facts, result.get("bearing"))
        tool = result.get("tool_returned")
        outcome.update(
            kind=question["kind"],
            latency_ms=result.get("latency_ms"),
            tool_same=None
            if tool is None
            else list(tool) == list(result["returned"]) and result.get("tool_bearing") == result.get("bearing"),
            tool_leaked=[] if tool is None else judge(question, tool, facts)["leaked"],
        )
        per_question.append(outcome)
    kinds = sorted({q["kind"] for q in questions})
    return {
        "by_kind": {kind: summarize(o for o in per_question if o["kind"] == kind) for kind in kinds},
        "overall": summarize(per_question),
        "per_question": per_question,
    }


def fact_table(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every fact of the set by id, with its tenant and subject (None: tenant knowledge)."""
    table: dict[str, dict[str, Any]] = {}
    for tenant in data["tenants"]:
        for fact in tenant["tenant_facts"]:
            table[fact["id"]] = {**fact, "tenant": tenant["tenant"], "subject": None}
        for fact in tenant["subject_facts"]:
            table[fact["id"]] = {**fact, "tenant": tenant["tenant"]}
    return table


def restricted_to_subjects(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The set without tenant knowledge: no tenant facts, and no question whose expected or forbidden
    facts include one (they would pass or fail for want of the fact, not for recall)."""
    tenant_ids = {f["id"] for t in data["tenants"] for f in t["tenant_facts"]}
    kept = [q for q in data["questions"] if not tenant_ids & set(q["expected"] + q["forbidden"])]
    tenants = [{**t, "tenant_facts": []} for t in data["tenants"]]
    return {"tenants": tenants, "questions": kept}, kept
