"""The lasting memory: pure rules for facts and their recall (seed 000 "The lasting memory", seed 003).

A subject's facts live together: at most 30, each agent-scoped (only that agent recalls it) or
shared (every agent of the tenant recalls it). They are kept until forgotten, or 365 days after
the subject's last question. No I/O here.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from schemas.events import FactEvent, FactForgotten, FactRemembered, FactRevised, FactsCleared

DAY_MS = 86_400_000


@dataclass(frozen=True)
class FactPolicy:
    max_facts: int = 30  # seed 000: "It holds up to 30 short facts"
    max_chars: int = 500
    keep_ms: int = 365 * DAY_MS  # seed 000: "365 days after their last question"
    recall_limit: int = 5  # seed 003: "The best handful go into the prompt"
    min_similarity: float = 0.2  # below this cosine a fact does not bear on the question


@dataclass(frozen=True)
class Fact:
    fact_id: str
    scope: str  # agent | shared
    agent: str | None  # who wrote it; for an agent-scoped fact, the only agent that recalls it
    text: str
    source: str  # agent | subject
    created_at: int
    updated_at: int
    terms: tuple[str, ...] = ()
    vector: tuple[float, ...] = ()  # the text's embedding, by `vector_model`; empty without one
    vector_model: str = ""

    def view(self) -> dict[str, Any]:
        """What its owner sees of a fact (no index terms, no vector)."""
        return {
            "fact_id": self.fact_id,
            "scope": self.scope,
            "agent": self.agent,
            "text": self.text,
            "source": self.source,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    def visible_to(self, agent: str | None) -> bool:
        """Seed 003: an agent's recall covers its own facts plus the shared ones."""
        return self.scope == "shared" or agent is None or self.agent == agent


@dataclass(frozen=True)
class SubjectFacts:
    """Everything the lasting memory holds about one subject of one tenant."""

    facts: tuple[Fact, ...] = ()
    last_question_at: int = 0
    expires_at: int = 0

    def alive(self, now_ms: int) -> bool:
        return self.expires_at > now_ms

    def find(self, fact_id: str) -> Fact | None:
        return next((fact for fact in self.facts if fact.fact_id == fact_id), None)


# --- the token index -------------------------------------------------------------------------
# MySQL full-text skips words under three characters and a long stop list, so a fact that is only
# "AI" cannot be found (seed 003). This index keeps every word of one letter or more, folds case
# and accents, and drops only a few function words.
STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "you",
        "your",
    }
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _stem(word: str) -> str:
    """A light English stem, so "diamonds" finds "diamond" and "mining" finds "mine"."""
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + keep
    return word


def index_terms(text: str) -> tuple[str, ...]:
    """The terms a text is indexed and searched by (the same function on both sides)."""
    words = [_fold(word) for word in _WORD.findall(text)]
    terms = [_stem(word) for word in words if word not in STOP_WORDS]
    if not terms:  # a text of stop words only is still findable by them
        terms = [_stem(word) for word in words]
    return tuple(terms)


# --- applying events -------------------------------------------------------------------------
class FactRefused(Exception):
    """An event the rules refuse (over the cap, unknown fact); the projection records nothing."""


def apply_fact_event(state: SubjectFacts, event: FactEvent, policy: FactPolicy) -> SubjectFacts:
    """The subject's facts after one event. Raises FactRefused for an event that changes nothing."""
    env = event.envelope
    now = env.occurred_at
    expires_at = max(state.expires_at, max(state.last_question_at, now) + policy.keep_ms)
    if isinstance(event, FactRemembered):
        if state.find(event.fact_id) is not None:
            raise FactRefused(f"fact {event.fact_id} exists already")
        if len(state.facts) >= policy.max_facts:
            raise FactRefused(f"the subject has {policy.max_facts} facts already")
        fact = Fact(
            fact_id=event.fact_id,
            scope=event.scope,
            agent=env.agent,
            text=event.text,
            source=event.source,
            created_at=now,
            updated_at=now,
            terms=index_terms(event.text),
        )
        return replace(state, facts=(*state.facts, fact), expires_at=expires_at)
    if isinstance(event, FactRevised):
        old = state.find(event.fact_id)
        if old is None:
            raise FactRefused(f"no fact {event.fact_id}")
        new = replace(old, text=event.text, updated_at=now, terms=index_terms(event.text), vector=(), vector_model="")
        return replace(state, facts=tuple(new if f.fact_id == old.fact_id else f for f in state.facts))
    if isinstance(event, FactForgotten):
        if state.find(event.fact_id) is None:
            raise FactRefused(f"no fact {event.fact_id}")
        return replace(state, facts=tuple(f for f in state.facts if f.fact_id != event.fact_id))
    assert isinstance(event, FactsCleared)
    return replace(state, facts=())


def questioned(state: SubjectFacts, at: int, policy: FactPolicy) -> SubjectFacts:
    """Every question moves the date the facts are kept until (seed 000)."""
    last = max(state.last_question_at, at)
    return replace(state, last_question_at=last, expires_at=max(state.expires_at, last + policy.keep_ms))


# --- recall ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recalled:
    fact: Fact
    score: float
    how: str  # keyword | similarity | recent


@dataclass
class Bm25:
    """Okapi BM25 over one subject's visible facts (a few dozen documents at most)."""

    documents: Sequence[Fact]
    k1: float = 1.2
    b: float = 0.75
    _df: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        for fact in self.documents:
            self._df.update(set(fact.terms))
        lengths = [len(fact.terms) for fact in self.documents] or [1]
        self._avg = sum(lengths) / len(lengths)

    def score(self, fact: Fact, query: Iterable[str]) -> float:
        counts = Counter(fact.terms)
        total = 0.0
        n = len(self.documents)
        for term in set(query):
            tf = counts.get(term, 0)
            if not tf:
                continue
            df = self._df[term]
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            norm = tf + self.k1 * (1 - self.b + self.b * len(fact.terms) / self._avg)
            total += idf * tf * (self.k1 + 1) / norm
        return total


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def recall(
    state: SubjectFacts,
    question: str,
    *,
    agent: str | None,
    now_ms: int,
    limit: int,
    similarity: dict[str, float] | None = None,
    min_similarity: float = 0.0,
) -> list[Recalled]:
    """The facts that bear on a question (seed 003, "How recall actually works", done better).

    1. Narrow lexically with the facts' own token index: every word counts, "AI" included.
    2. Rank by similarity when an embedding model gave `similarity` (fact id -> cosine), scoring every
       visible fact so a paraphrase with no shared word is still found; by BM25 otherwise.
    3. The best `limit` go in; when nothing matches, the most recent facts instead of nothing.
    """
    if not state.alive(now_ms):
        return []
    visible = [fact for fact in state.facts if fact.visible_to(agent)]
    query = index_terms(question)
    ranked: list[Recalled] = []
    if similarity is not None:
        ranked = [
            Recalled(f, similarity[f.fact_id], "similarity")
            for f in visible
            if similarity.get(f.fact_id, 0.0) >= max(min_similarity, 1e-9)
        ]
    else:
        bm25 = Bm25(visible)
        narrowed = [fact for fact in visible if set(fact.terms) & set(query)]
        ranked = [Recalled(fact, bm25.score(fact, query), "keyword") for fact in narrowed]
    ranked = [hit for hit in ranked if hit.score > 0]
    ranked.sort(key=lambda hit: (-hit.score, -hit.fact.updated_at, hit.fact.fact_id))
    if ranked:
        return ranked[:limit]
    recent = sorted(visible, key=lambda fact: (-fact.updated_at, fact.fact_id))[:limit]
    return [Recalled(fact, 0.0, "recent") for fact in recent]
