"""The lasting memory's projections: fact events into MongoDB, and questions moving the kept-until date."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from projections.engines import Embedder, EmbeddingFailed
from projections.facts import FactPolicy, FactRefused, SubjectFacts, apply_fact_event
from projections.ports import Checkpoints, FactStore
from projections.position import Position
from schemas.events import SESSION_THREAD, FactEvent, QuestionAsked, ThreadEvent
from streams.projector import advance_past

log = logging.getLogger(__name__)


class FactStep:
    """Fold a batch's fact events per subject, embed what changed, then write each subject once with its
    newest position."""

    def __init__(self, store: FactStore, policy: FactPolicy, embedder: Embedder | None = None) -> None:
        self._store = store
        self._policy = policy
        self._embedder = embedder

    async def __call__(self, events: Sequence[tuple[FactEvent, Position]]) -> None:
        states: dict[tuple[str, str], tuple[SubjectFacts, Position]] = {}
        for event, position in events:
            env = event.envelope
            key = (env.tenant, env.subject or "")
            if key not in states:
                states[key] = (await self._store.load(*key) or SubjectFacts(), position)
            state, _ = states[key]
            try:
                state = apply_fact_event(state, event, self._policy)
            except FactRefused as refused:
                # the API refuses these first; here they are late duplicates or over-cap races
                log.info("%s at %s changes nothing: %s", event.TYPE, position.token(), refused)
            states[key] = (state, position)
        writes = []
        for (tenant, subject), (folded, position) in states.items():
            ready = await embedded(folded, self._embedder) if self._embedder is not None else folded
            writes.append((tenant, subject, ready, position))
        await self._store.write_many(writes)
        await advance_past(self._store, events)


async def embedded(state: SubjectFacts, embedder: Embedder) -> SubjectFacts:
    """Vectors for the facts that have none from this model; a model change re-embeds, never mixes."""
    stale = [fact for fact in state.facts if fact.vector_model != embedder.name]
    if not stale:
        return state
    try:
        vectors = await embedder.embed([fact.text for fact in stale])
    except EmbeddingFailed as exc:
        log.warning("embedding failed, facts kept without vectors: %s", exc)
        return state
    fresh = {
        fact.fact_id: replace(fact, vector=tuple(vector), vector_model=embedder.name)
        for fact, vector in zip(stale, vectors, strict=True)
    }
    return replace(state, facts=tuple(fresh.get(fact.fact_id, fact) for fact in state.facts))


class FactActivityStep:
    """Every question to a subject moves the date their facts are kept until (seed 000)."""

    def __init__(self, store: FactStore, checkpoints: Checkpoints, policy: FactPolicy) -> None:
        self._store = store
        self._checkpoints = checkpoints
        self._policy = policy

    async def __call__(self, events: Sequence[tuple[ThreadEvent, Position]]) -> None:
        latest: dict[tuple[str, str], int] = {}
        for event, _ in events:
            env = event.envelope
            if isinstance(event, QuestionAsked) and env.thread == SESSION_THREAD and env.subject is not None:
                key = (env.tenant, env.subject)
                latest[key] = max(latest.get(key, 0), env.occurred_at)
        await self._store.questioned(
            [(tenant, subject, at) for (tenant, subject), at in latest.items()], self._policy.keep_ms
        )
        await advance_past(self._checkpoints, events)
