"""The held-out recall set (tests/fixtures/recall_heldout.json) is well formed and keeps its own rules.

No recall runs here: bench/recall_eval.py measures memlog against the set through the HTTP API. These
checks keep the set honest: every answer is one the asker may see, every forbidden fact one it may not,
a paraphrase shares no content word (nor a stem) with its fact, a lexical question at least one.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.make_recall_heldout import build

PATH = Path(__file__).parents[1] / "fixtures" / "recall_heldout.json"
DATA: dict[str, Any] = json.loads(PATH.read_text())
KINDS = {
    "lexical": (60, 80),
    "paraphrase": (60, 80),
    "acronym": (18, 25),
    "tenant": (35, 45),
    "scope_trap": (25, 40),
    "cross_subject": (25, 40),
    "unanswerable": (50, 70),
}
# Words that carry no content: a question and its fact may share them and still be a paraphrase.
STOPWORDS = frozenset(
    """a an the and or but if so of to in on at by for from with about into over after before under than then
    as is are was were be been being am do does did done have has had having i i'm i'd me my mine myself you
    your yours we us our they them their he him his she her it its this that these those there here what
    whats what's which who whom whose when where why how any some all each every no not don't dont can could
    should would will shall may might must just only also still again yet ever very too more most much many
    s t d ll m re ve remind tell know remember say said please let like get got want wanted one
    """.split()  # noqa: SIM905
)


def facts_by_id() -> dict[str, dict[str, Any]]:
    held = {}
    for tenant in DATA["tenants"]:
        for fact in tenant["tenant_facts"]:
            held[fact["id"]] = {**fact, "tenant": tenant["tenant"], "subject": None}
        for fact in tenant["subject_facts"]:
            held[fact["id"]] = {**fact, "tenant": tenant["tenant"]}
    return held


def visible(fact: dict[str, Any], question: dict[str, Any]) -> bool:
    """Whether the asker may be given the fact: same tenant; the question's subject or the tenant's;
    an agent-scoped fact only to the agent that wrote it (never to a read that names no agent)."""
    if fact["tenant"] != question["tenant"]:
        return False
    if fact["subject"] is not None and fact["subject"] != question["subject"]:
        return False
    return fact["scope"] == "shared" or (question["agent"] is not None and fact["agent"] == question["agent"])


def words(text: str) -> set[str]:
    found = set()
    for raw in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower()):
        word = raw.removesuffix("'s")
        if word in STOPWORDS or len(word) < 2:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            found.add(word[:-1])
            continue
        found.add(word)
    return found


def shares_stem(a: set[str], b: set[str], length: int) -> set[tuple[str, str]]:
    return {(x, y) for x in a for y in b if x == y or (min(len(x), len(y)) >= length and x[:length] == y[:length])}


def test_the_file_is_what_the_builder_writes() -> None:
    assert build() == DATA, "run `python -m tests.fixtures.make_recall_heldout`"


def test_ids_are_unique_and_scopes_consistent() -> None:
    ids = [f["id"] for t in DATA["tenants"] for f in t["tenant_facts"] + t["subject_facts"]]
    assert len(ids) == len(set(ids))
    for tenant in DATA["tenants"]:
        assert len(tenant["agents"]) == 3 and 3 <= len(tenant["subjects"]) <= 4
        for fact in tenant["tenant_facts"] + tenant["subject_facts"]:
            assert fact["scope"] in {"shared", "agent"}
            assert (fact["agent"] is None) == (fact["scope"] == "shared"), fact
            assert fact["agent"] is None or fact["agent"] in tenant["agents"], fact
            assert fact["text"].strip() == fact["text"] and fact["text"]
        for fact in tenant["subject_facts"]:
            assert fact["subject"] in tenant["subjects"]


def test_sizes() -> None:
    assert len(DATA["tenants"]) == 3
    per_subject = Counter((t["tenant"], f["subject"]) for t in DATA["tenants"] for f in t["subject_facts"])
    assert max(per_subject.values()) <= 25
    assert 140 <= sum(per_subject.values()) <= 160
    assert all(len(t["tenant_facts"]) == 10 for t in DATA["tenants"])
    assert all(any(f["scope"] == "agent" for f in t["tenant_facts"]) for t in DATA["tenants"])
    assert 300 <= len(DATA["questions"]) <= 340


def test_counts_per_kind() -> None:
    counts = Counter(q["kind"] for q in DATA["questions"])
    assert set(counts) == set(KINDS)
    for kind, (low, high) in KINDS.items():
        assert low <= counts[kind] <= high, (kind, counts[kind])


def test_every_question_refers_to_facts_it_may_or_may_not_see() -> None:
    held = facts_by_id()
    tenants = {t["tenant"]: t for t in DATA["tenants"]}
    for q in DATA["questions"]:
        tenant = tenants[q["tenant"]]
        assert q["subject"] in tenant["subjects"], q
        assert q["agent"] is None or q["agent"] in tenant["agents"], q
        assert q["text"].strip()
        for fact_id in q["expected"]:
            assert fact_id in held, q
            assert visible(held[fact_id], q), (q, fact_id)
        for fact_id in q["forbidden"]:
            assert fact_id in held, q
            assert not visible(held[fact_id], q), (q, fact_id)
        assert not set(q["expected"]) & set(q["forbidden"])


def test_each_kind_keeps_its_rule() -> None:
    held = facts_by_id()
    for q in DATA["questions"]:
        expected = [held[i] for i in q["expected"]]
        forbidden = [held[i] for i in q["forbidden"]]
        if q["kind"] in {"lexical", "paraphrase", "acronym"}:
            assert len(expected) == 1 and expected[0]["subject"] == q["subject"], q
        if q["kind"] == "tenant":
            assert expected and any(f["subject"] is None for f in expected), q
        if q["kind"] in {"scope_trap", "unanswerable"}:
            assert not expected, q
        if q["kind"] == "scope_trap":
            # the fact that would answer exists in the subject's (or tenant's) memory, written by another
            # agent, or agent-scoped and asked for with no agent
            assert forbidden and all(f["scope"] == "agent" and f["agent"] != q["agent"] for f in forbidden), q
            assert all(f["subject"] in {None, q["subject"]} for f in forbidden), q
        if q["kind"] == "cross_subject":
            assert forbidden and all(f["subject"] not in {None, q["subject"]} for f in forbidden), q
            assert all(f["subject"] == q["subject"] for f in expected), q


@pytest.mark.parametrize("kind", ["lexical", "paraphrase"])
def test_lexical_questions_share_a_word_paraphrases_none(kind: str) -> None:
    held = facts_by_id()
    wrong = []
    for q in DATA["questions"]:
        if q["kind"] != kind:
            continue
        fact = held[q["expected"][0]]
        if kind == "lexical":
            if not shares_stem(words(q["text"]), words(fact["text"]), 5):
                wrong.append((q["text"], fact["text"]))
        elif shared := shares_stem(words(q["text"]), words(fact["text"]), 4):
            wrong.append((q["text"], fact["text"], shared))
    assert not wrong, wrong


def test_acronym_questions_spell_the_acronym_otherwise() -> None:
    """Like "my PRs" or "A.I.": the question writes the acronym dotted or plural, not as the fact does."""
    held = facts_by_id()
    for q in DATA["questions"]:
        if q["kind"] != "acronym":
            continue
        found = re.findall(r"\b(?:[A-Z]\.){2,}|\b[A-Z]{2,}s\b", q["text"])
        assert found, q["text"]
        fact = held[q["expected"][0]]["text"]
        assert not any(token in fact for token in found), (q["text"], fact)
