"""The lasting memory: pure rules for facts and their recall (seed 000 "The lasting memory", seed 003).

A subject's facts live together: at most 30, each agent-scoped (only that agent recalls it) or
shared (every agent of the tenant recalls it). They are kept until forgotten, or 365 days after
the subject's last question. A tenant's own knowledge (events with no subject) lives the same way
under the key TENANT_KNOWLEDGE, with its own limit and lifetime. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from projections.words import index_terms
from schemas.events import FactEvent, FactForgotten, FactRemembered, FactRevised, FactsCleared

DAY_MS = 86_400_000
FOREVER_MS = 100 * 365 * DAY_MS


@dataclass(frozen=True)
class FactPolicy:
    max_facts: int = 30  # seed 000: "It holds up to 30 short facts"
    max_chars: int = 500
    keep_ms: int = 365 * DAY_MS  # seed 000: "365 days after their last question"
    tenant_max_facts: int = 200  # a tenant's own knowledge, recalled for every subject
    tenant_keep_ms: int = 0  # a tenant's knowledge is kept this long after its last change; 0: until deleted

    def limits(self, tenant_knowledge: bool) -> tuple[int, int]:
        """(the most facts kept, how long after the last question or change they are kept)."""
        if tenant_knowledge:
            return self.tenant_max_facts, self.tenant_keep_ms or FOREVER_MS
        return self.max_facts, self.keep_ms


def shown_source(source: str, belongs_to: str) -> str:
    """Who wrote a fact, as shown: `agent` (an agent's remember) or, by hand, `subject` for a subject's
    fact and `backend` for the tenant's knowledge (stored as the event's `subject` source: no subject
    writes tenant knowledge, the backend does)."""
    return "backend" if belongs_to == "tenant" and source == "subject" else source


TENANT_KNOWLEDGE = ""  # the store key of a tenant's own facts: no subject is named "" (the name rule)


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


# --- applying events -------------------------------------------------------------------------
class FactRefused(Exception):
    """An event the rules refuse (over the cap, unknown fact); the projection records nothing."""


def apply_fact_event(state: SubjectFacts, event: FactEvent, policy: FactPolicy) -> SubjectFacts:
    """The subject's facts after one event. Raises FactRefused for an event that changes nothing."""
    env = event.envelope
    now = env.occurred_at
    max_facts, keep_ms = policy.limits(env.subject is None)
    expires_at = max(state.expires_at, max(state.last_question_at, now) + keep_ms)
    if isinstance(event, FactRemembered):
        if state.find(event.fact_id) is not None:
            raise FactRefused(f"fact {event.fact_id} exists already")
        if len(state.facts) >= max_facts:
            raise FactRefused(f"{env.subject or 'the tenant'} has {max_facts} facts already")
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
        facts = tuple(new if f.fact_id == old.fact_id else f for f in state.facts)
        # a subject's facts are kept from the last question (seed 000), the tenant's from the last change
        return replace(state, facts=facts, expires_at=expires_at if env.subject is None else state.expires_at)
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
