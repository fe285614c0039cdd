"""The lasting memory's pure rules: the cap, expiry, the token index and recall."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.facts import (
    DAY_MS,
    FactPolicy,
    FactRefused,
    SubjectFacts,
    apply_fact_event,
    questioned,
)
from projections.recall import RecallPolicy, candidates, rank, recent
from projections.words import index_terms
from schemas.events import Envelope, FactEvent, FactForgotten, FactRemembered, FactRevised, FactsCleared

POLICY = FactPolicy()
T0 = 1_795_000_000_000


def env(agent: str | None = "allay", at: int = T0) -> Envelope:
    return Envelope(tenant="castle", subject="ann", agent=agent, thread="session", producer="t", occurred_at=at)


def remembered(texts: list[tuple[str, str, str | None]], at: int = T0) -> SubjectFacts:
    state = SubjectFacts()
    for number, (text, scope, agent) in enumerate(texts):
        state = apply_fact_event(state, FactRemembered(env(agent, at + number), f"f{number}", scope, text), POLICY)
    return state


def test_facts_are_added_revised_forgotten_and_cleared() -> None:
    state = remembered([("base at 100 64 -20", "agent", "allay"), ("likes short answers", "shared", "allay")])
    state = apply_fact_event(state, FactRevised(env(), "f0", "base at 120 64 -20"), POLICY)
    assert [f.text for f in state.facts] == ["base at 120 64 -20", "likes short answers"]
    state = apply_fact_event(state, FactForgotten(env(), "f1"), POLICY)
    assert [f.fact_id for f in state.facts] == ["f0"]
    assert apply_fact_event(state, FactsCleared(env()), POLICY).facts == ()


def test_the_31st_fact_is_refused_and_nothing_is_evicted() -> None:
    state = remembered([(f"fact {n}", "shared", None) for n in range(30)])
    with pytest.raises(FactRefused, match="30"):
        apply_fact_event(state, FactRemembered(env(), "f31", "shared", "one too many"), POLICY)
    assert len(state.facts) == 30


def recall(state: SubjectFacts, question: str, *, agent: str | None, now_ms: int, limit: int) -> list:  # type: ignore[type-arg]
    """Keyword recall (no model) of one subject's facts, as the context read does it."""
    return rank(candidates(state, None, agent=agent, now_ms=now_ms), question, RecallPolicy(limit=limit))[:limit]


def test_facts_are_kept_365_days_after_the_last_question() -> None:
    state = remembered([("old fact", "shared", None)], at=T0)
    assert state.alive(T0 + 365 * DAY_MS - 1) and not state.alive(T0 + 365 * DAY_MS)
    later = questioned(state, T0 + 100 * DAY_MS, POLICY)
    assert later.alive(T0 + 465 * DAY_MS - 1) and not later.alive(T0 + 465 * DAY_MS)
    assert recall(state, "old fact", agent=None, now_ms=T0 + 366 * DAY_MS, limit=5) == []
    assert len(recall(state, "old fact", agent=None, now_ms=T0 + 364 * DAY_MS, limit=5)) == 1


def test_a_fact_that_is_only_ai_is_findable_by_ai() -> None:
    state = remembered([("AI", "shared", None), ("the base is in the mountains", "shared", None)])
    (hit,) = recall(state, "what do you know about AI?", agent="x", now_ms=T0, limit=5)
    assert hit.fact.text == "AI" and hit.how == "keyword"


def test_keyword_recall_ranks_by_the_words_matched_and_claims_nothing_when_none_bears() -> None:
    state = remembered(
        [
            ("my base is at 100 64 -20", "shared", None),
            ("I work on a redstone computer", "shared", None),
            ("my favourite block is copper", "shared", None),
            ("the redstone computer has 8 bits of memory", "shared", None),
        ]
    )
    hits = recall(state, "how is my redstone computer going?", agent=None, now_ms=T0, limit=5)
    assert [h.fact.fact_id for h in hits] == ["f3", "f1"]  # the same words matched: the newest first
    assert all(h.how == "keyword" and 0.3 <= h.score <= 1 for h in hits)
    assert recall(state, "zzz qqq", agent=None, now_ms=T0, limit=2) == []
    fill = recent(candidates(state, None, agent=None, now_ms=T0), 2)
    assert [h.fact.fact_id for h in fill] == ["f3", "f2"] and {h.how for h in fill} == {"recent"}


def test_an_agent_recalls_its_own_facts_and_the_shared_ones_only() -> None:
    state = remembered([("mine", "agent", "a"), ("theirs", "agent", "b"), ("everyone's", "shared", "b")])
    seen = {agent: {f.text for f, _ in candidates(state, None, agent=agent, now_ms=T0)} for agent in ("a", "b")}
    assert seen == {"a": {"mine", "everyone's"}, "b": {"theirs", "everyone's"}}
    shared = candidates(state, None, agent=None, now_ms=T0, shared_only=True)
    assert [f.text for f, _ in shared] == ["everyone's"]


def test_the_index_folds_case_accents_plurals_and_acronyms() -> None:
    assert index_terms("Diamonds in the CAFÉ") == ("diamond", "cafe")
    assert index_terms("the") == ("the",)  # a text of stop words only is still findable
    assert index_terms("my PRs and IDs") == ("pr", "id") == index_terms("PR ID")
    assert index_terms("A.I. in the U.S.A.") == ("ai", "usa") == index_terms("AI USA")
    assert index_terms("Kira's base") == ("kira", "base")


def test_the_index_stems_as_snowball_does() -> None:
    assert index_terms("mining") == index_terms("mine") == ("mine",)
    assert index_terms("stored") == index_terms("store") == index_terms("storing")
    assert index_terms("berries") == index_terms("berry")
    assert index_terms("Москва") == ("москва",)  # another script's word is kept, folded, unstemmed


@given(st.lists(st.sampled_from(["remember", "revise", "forget", "clear"]), max_size=60), st.data())
def test_any_sequence_keeps_the_cap_and_forgotten_facts_stay_gone(kinds: list[str], data: st.DataObject) -> None:
    state = SubjectFacts()
    gone: set[str] = set()
    for number, kind in enumerate(kinds):
        fact_id = f"f{data.draw(st.integers(0, number))}"
        event: FactEvent
        if kind == "remember":
            fact_id = f"f{number}"
            event = FactRemembered(env(), fact_id, "shared", f"text {number}")
        elif kind == "revise":
            event = FactRevised(env(), fact_id, f"revised {number}")
        elif kind == "forget":
            event = FactForgotten(env(), fact_id)
        else:
            event = FactsCleared(env())
        before = {f.fact_id for f in state.facts}
        try:
            state = apply_fact_event(state, event, POLICY)
        except FactRefused:
            continue
        if kind == "forget":
            gone.add(fact_id)
        elif kind == "clear":
            gone.update(before)
    ids = [f.fact_id for f in state.facts]
    assert len(ids) == len(set(ids)) <= POLICY.max_facts
    assert not set(ids) & gone
