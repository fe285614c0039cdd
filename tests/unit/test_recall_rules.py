"""Recall's pure rules: the subject's facts and the tenant's knowledge ranked together, the floor as a
label, the best `limit` always given (bearing first, then the others), vague and compound questions,
the rendered groups, exclusion and paging."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.facts import Fact, SubjectFacts
from projections.recall import (
    SUBJECT,
    TENANT,
    Recalled,
    RecallPolicy,
    candidates,
    clauses,
    combined,
    offer,
    page,
    rank,
    recent,
    render,
    score,
    texts_to_score,
    vague,
)
from projections.words import index_terms

T0 = 1_795_000_000_000
ALIVE = T0 + 10**12


def fact(fact_id: str, text: str, scope: str = "shared", agent: str | None = None, at: int = T0) -> Fact:
    return Fact(fact_id, scope, agent, text, "subject", at, at, index_terms(text))


SUBJECT_FACTS = SubjectFacts(
    (
        fact("s1", "my base is at 100 64 -20"),
        fact("s2", "I keep my spare diamonds in the ender chest", at=T0 + 1),
        fact("s3", "my secret build is a copper tower", scope="agent", agent="builder", at=T0 + 2),
    ),
    T0,
    ALIVE,
)
KNOWLEDGE = SubjectFacts(
    (
        fact("k1", "keep-inventory is on in the nether"),
        fact("k2", "backups are taken every six hours", at=T0 + 1),
        fact("k3", "the builder bot may place at most 64 blocks a minute", scope="agent", agent="builder"),
    ),
    0,
    ALIVE,
)


def test_the_tenants_knowledge_is_ranked_with_the_subjects_facts_and_says_whose_it_is() -> None:
    pool = candidates(SUBJECT_FACTS, KNOWLEDGE, agent="helper", now_ms=T0)
    assert {f.fact_id for f, _ in pool} == {"s1", "s2", "k1", "k2"}  # neither agent-scoped fact of builder
    hits = rank(pool, "how often are backups taken?", RecallPolicy())
    assert [(h.fact.fact_id, h.belongs_to) for h in hits] == [("k2", TENANT)]
    hits = rank(pool, "where are my diamonds?", RecallPolicy())
    assert [(h.fact.fact_id, h.belongs_to) for h in hits] == [("s2", SUBJECT)]


def test_an_agent_sees_its_own_knowledge_and_a_reader_naming_none_only_the_shared() -> None:
    builder = {f.fact_id for f, _ in candidates(SUBJECT_FACTS, KNOWLEDGE, agent="builder", now_ms=T0)}
    assert builder == {"s1", "s2", "s3", "k1", "k2", "k3"}
    nobody = {f.fact_id for f, _ in candidates(SUBJECT_FACTS, KNOWLEDGE, agent=None, now_ms=T0, shared_only=True)}
    assert nobody == {"s1", "s2", "k1", "k2"}


def test_expired_knowledge_is_not_a_candidate() -> None:
    expired = SubjectFacts(KNOWLEDGE.facts, 0, T0)
    assert {f.fact_id for f, _ in candidates(SUBJECT_FACTS, expired, agent=None, now_ms=T0)} == {"s1", "s2", "s3"}


def test_nothing_is_claimed_for_an_unrelated_question_and_the_render_says_so() -> None:
    pool = candidates(SUBJECT_FACTS, KNOWLEDGE, agent=None, now_ms=T0)
    assert rank(pool, "what is the capital of Peru?", RecallPolicy()) == []
    assert rank(pool, "", RecallPolicy()) == []
    assert "nothing" in render([])


def test_a_semantic_match_is_found_without_a_shared_word_and_the_floor_drops_weak_ones() -> None:
    pool = candidates(SUBJECT_FACTS, KNOWLEDGE, agent=None, now_ms=T0)
    similarity = {"s1": 0.62, "s2": 0.1, "s3": 0.05, "k1": 0.12, "k2": 0.08}
    hits = rank(pool, "I got lost, how do I find my way home?", RecallPolicy(), similarity)
    assert [(h.fact.fact_id, h.how) for h in hits] == [("s1", "similarity")]
    assert rank(pool, "I got lost", RecallPolicy(), {k: 0.1 for k in similarity}) == []


def test_an_exact_word_wins_over_a_vaguer_paraphrase() -> None:
    pool = candidates(SUBJECT_FACTS, KNOWLEDGE, agent=None, now_ms=T0)
    similarity = {"s1": 0.45, "s2": 0.43, "s3": 0.0, "k1": 0.0, "k2": 0.0}
    hits = rank(pool, "where are my diamonds?", RecallPolicy(), similarity)
    assert hits[0].fact.fact_id == "s2" and hits[0].how == "both"


def test_recent_fill_ins_are_marked_and_skip_what_was_matched() -> None:
    pool = candidates(SUBJECT_FACTS, KNOWLEDGE, agent=None, now_ms=T0)
    fill = recent(pool, 2, exclude={"s2"})
    assert [h.how for h in fill] == ["recent", "recent"] and "s2" not in {h.fact.fact_id for h in fill}
    assert "Other facts you hold about kim, not matched to the question:\n- " in render(fill, "kim")
    bearing = Recalled(KNOWLEDGE.facts[0], 0.9, "keyword", TENANT, bears=True)
    assert render([bearing], "kim") == "- [tenant] keep-inventory is on in the nether\n"


def test_the_agent_gets_the_best_facts_whatever_their_score_those_that_bear_first() -> None:
    pool = candidates(SUBJECT_FACTS, KNOWLEDGE, agent=None, now_ms=T0)
    similarity = {"s1": 0.62, "s2": 0.48, "s3": 0.05, "k1": 0.12, "k2": 0.08}
    scored = score(pool, "I got lost, how do I find my way home?", RecallPolicy(), similarity)
    given = offer(pool, scored, RecallPolicy())
    assert sorted(h.fact.fact_id for h in given) == sorted(f.fact_id for f, _ in pool)  # each once, none left out
    assert [(h.fact.fact_id, h.bears) for h in given[:2]] == [("s1", True), ("s2", False)]
    assert given[1].how == "similarity" and 0 < given[1].score < RecallPolicy().floor
    assert given[-1].how == "recent" and given[-1].score == 0.0  # scored below `near`: by age, as recent
    rendered = render(given[:3], "kim")
    bearing, others = rendered.split("Other facts you hold about kim, not matched to the question:\n")
    assert bearing == "- my base is at 100 64 -20\n" and others.startswith("- I keep my spare diamonds")
    assert rank(pool, "I got lost, how do I find my way home?", RecallPolicy(), similarity) == given[:1]


def test_a_vague_question_gets_the_newest_facts_labelled_not_matched() -> None:
    pool = candidates(SUBJECT_FACTS, KNOWLEDGE, agent=None, now_ms=T0)
    similarity = {"s1": 0.11, "s2": 0.12, "s3": 0.1, "k1": 0.09, "k2": 0.13}  # the model finds nothing
    given = offer(pool, score(pool, "what did I tell you before?", RecallPolicy(), similarity), RecallPolicy())
    assert [h.fact.fact_id for h in given[:3]] == ["s3", "s2", "k2"]  # newest first
    assert not any(h.bears for h in given) and {h.how for h in given} == {"recent"}
    assert render(given, "kim").startswith("(nothing memlog keeps bears on this question)\nOther facts you hold")
    assert [h.fact.fact_id for h in offer(pool, [], RecallPolicy())][:1] == ["s3"]  # no question at all


@pytest.mark.parametrize(
    "question",
    [
        "what did I tell you before?",
        "What do you know about me?",
        "remind me what I said",
        "What have I told you so far?",
        "Qu'est-ce que je t'ai dit avant ?",
        "Was habe ich dir vorher gesagt?",
        "¿Qué sabes de mí?",
        "Что я тебе говорил раньше?",
    ],
)
def test_a_vague_question_gets_the_newest_even_when_a_fact_shares_its_words(question: str) -> None:
    """A fact that says "before" (or "know", "told") does not answer "what did I tell you before?"."""
    facts = SubjectFacts(
        (
            fact("b1", "I always stretch before I tell you what I know about running, so far so good", at=T0),
            fact("b2", "my dog is called Rex", at=T0 + 1),
            fact("b3", "je t'ai dit avant: я говорил раньше, ich habe es dir vorher gesagt", at=T0 + 2),
        ),
        T0,
        ALIVE,
    )
    pool = candidates(facts, None, agent=None, now_ms=T0)
    similarity = {"b1": 0.9, "b2": 0.1, "b3": 0.95}  # a model that finds the words, not what is asked
    assert vague(question) and texts_to_score(question) == []
    scored = combined(pool, [(question, similarity)], RecallPolicy())
    given = offer(pool, scored, RecallPolicy())
    assert [h.fact.fact_id for h in given] == ["b3", "b2", "b1"] and not any(h.bears for h in given)
    assert {h.how for h in given} == {"recent"}
    assert rank(pool, question, RecallPolicy(), similarity) != []  # scored alone, the words would have matched


@pytest.mark.parametrize(
    "question", ["what is AI?", "what did I say about my dog?", "where did I store the diamonds?", "before noon?"]
)
def test_a_question_about_something_is_not_vague(question: str) -> None:
    assert not vague(question) and texts_to_score(question)[0] == question


ASKING = st.sampled_from(["what", "did", "I", "tell", "you", "before", "know", "about", "me", "said", "que", "дог"])


@given(
    st.lists(st.text(alphabet="abc xyz", max_size=12), min_size=1, max_size=8),
    st.lists(st.one_of(ASKING, st.text(alphabet="abc xyz?", max_size=6)), max_size=6).map(" ".join),
    st.booleans(),
)
def test_recall_is_never_empty_while_the_asker_may_see_a_fact(texts: list[str], question: str, model: bool) -> None:
    """Whatever the question (vague, of stop words, compound, matching nothing), every fact the asker may
    see is given, so the first page is never empty (unless strict)."""
    facts = tuple(fact(f"f{n}", text or "x", at=T0 + n) for n, text in enumerate(texts))
    pool = candidates(SubjectFacts(facts, T0, ALIVE), None, agent=None, now_ms=T0)
    similarity = {f.fact_id: (hash(f.text) % 100) / 100 for f in facts} if model else None
    policy = RecallPolicy()
    given = offer(pool, combined(pool, [(text, similarity) for text in texts_to_score(question)], policy), policy)
    assert len(given) == len(pool) and {h.fact.fact_id for h in given} == {f.fact_id for f in facts}
    assert page(given, limit=5)[0]


def test_a_compound_question_is_answered_in_each_part() -> None:
    pool = candidates(SUBJECT_FACTS, KNOWLEDGE, agent=None, now_ms=T0)
    question = "where are my gems and how often is the world saved?"  # no word shared: the model alone
    assert clauses(question) == ["where are my gems", "how often is the world saved"]
    assert clauses("where are my diamonds?") == [] and clauses("salt and") == []
    whole = {"s1": 0.2, "s2": 0.55, "s3": 0.1, "k1": 0.5, "k2": 0.3}
    parts = [
        (question, whole),
        ("where are my diamonds", {"s1": 0.2, "s2": 0.7, "s3": 0.1, "k1": 0.3, "k2": 0.05}),
        ("how often are backups taken", {"s1": 0.1, "s2": 0.05, "s3": 0.1, "k1": 0.2, "k2": 0.75}),
    ]
    first_two = {h.fact.fact_id for h in combined(pool, parts, RecallPolicy())[:2]}
    assert first_two == {"s2", "k2"}
    alone = [h.fact.fact_id for h in combined(pool, [(question, whole)], RecallPolicy())]
    assert alone[:2] == ["s2", "k1"]  # the whole question alone would bring its best-matching part


@given(st.integers(1, 7), st.sets(st.sampled_from([f"f{n}" for n in range(20)]), max_size=6))
def test_paging_with_exclusion_returns_every_hit_once_in_order(limit: int, exclude: set[str]) -> None:
    hits = [Recalled(fact(f"f{n}", f"fact {n}"), 1 - n / 40, "keyword") for n in range(20)]
    seen: list[str] = []
    after = None
    while True:
        taken, after = page(hits, limit=limit, exclude=exclude, after=after)
        assert len(taken) <= limit
        seen += [h.fact.fact_id for h in taken]
        if after is None:
            break
    assert seen == [f"f{n}" for n in range(20) if f"f{n}" not in exclude]
