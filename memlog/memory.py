"""The lasting memory's commands and reads, shared by the HTTP API, the CLI and the agent's tools."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any

from adapters.embeddings import Embedder, EmbeddingFailed
from projections.facts import Fact, FactPolicy, Recalled, SubjectFacts, cosine, recall
from projections.ports import FactSlots, FactStore
from projections.position import Position
from schemas.errors import InvalidEvent, NotFound
from schemas.events import (
    FACT_SCOPES,
    SESSION_THREAD,
    Envelope,
    FactForgotten,
    FactRemembered,
    FactRevised,
    FactsCleared,
    ToolCalled,
    check_name,
    check_text,
    now_ms,
)
from schemas.limits import check_utf8
from streams.producer import EventProducer

TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "remember",
            "description": "Save one short, lasting fact about the user, to recall in later conversations. "
            "Say so to the user when you do.",
            "parameters": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The fact, worded as you would ask about it."},
                    "scope": {
                        "type": "string",
                        "enum": list(FACT_SCOPES),
                        "description": "agent: only you recall it; shared: every agent of this tenant does.",
                    },
                },
                "required": ["text"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "recall",
            "description": "Look up lasting facts about the user beyond those already supplied with the context.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look for."}},
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "forget",
            "description": "Delete a lasting fact that turned out to be wrong.",
            "parameters": {
                "type": "object",
                "properties": {"fact_id": {"type": "string", "description": "The id recall or the context gave."}},
                "required": ["fact_id"],
                "additionalProperties": False,
            },
        },
    },
]


def recalled_view(hit: Recalled) -> dict[str, Any]:
    return {**hit.fact.view(), "score": round(hit.score, 4), "how": hit.how}


class Memory:
    """Validate, produce, read. Refusals name the problem and produce nothing."""

    def __init__(
        self,
        producer: EventProducer,
        store: FactStore,
        policy: FactPolicy,
        producer_name: str,
        embedder: Embedder | None = None,
        *,
        slots: FactSlots,
    ) -> None:
        self._producer = producer
        self._store = store
        self._policy = policy
        self._producer_name = producer_name
        self._embedder = embedder
        self._slots = slots

    def _envelope(self, tenant: str, subject: str, agent: str | None) -> Envelope:
        return Envelope(
            tenant=tenant, subject=subject, agent=agent, thread=SESSION_THREAD, producer=self._producer_name
        )

    def _text(self, text: object) -> str:
        value = check_utf8("text", check_text("text", text)).strip()  # a fact keeps no original to fall back on
        if not value:
            raise InvalidEvent("text", "must not be blank")
        if len(value) > self._policy.max_chars:
            raise InvalidEvent("text", f"is {len(value)} characters; a fact is at most {self._policy.max_chars}")
        return value

    async def state(self, tenant: str, subject: str) -> SubjectFacts:
        state = await self._store.load(tenant, subject)
        if state is None or not state.alive(now_ms()):
            return SubjectFacts()
        return state

    async def remember(
        self, tenant: str, subject: str, text: object, *, agent: str | None, scope: str | None, source: str
    ) -> tuple[str, Position]:
        """Save a fact; without a scope it is the agent's own when an agent saves it, else shared."""
        text = self._text(text)
        if scope is None:
            scope = "agent" if agent else "shared"
        if scope not in FACT_SCOPES:
            raise InvalidEvent("scope", f"must be one of {', '.join(FACT_SCOPES)}, not {scope!r}")
        fact_id = str(uuid.uuid4())
        event = FactRemembered(self._envelope(tenant, subject, agent), fact_id, scope, text, source)
        held = {fact.fact_id for fact in (await self.state(tenant, subject)).facts}
        # Reserved at acceptance, not read from the projection alone: it may not have applied the
        # saves just accepted, and a 202 must mean the fact will be kept.
        if not await self._slots.reserve(tenant, subject, fact_id, held, self._policy.max_facts):
            raise InvalidEvent(
                "facts",
                f"{subject} has {self._policy.max_facts} facts saved or being saved, the most kept; "
                "forget or revise one before remembering more",
            )
        try:
            return fact_id, await self._producer.produce([event])
        except BaseException:
            await self._slots.release(tenant, subject, fact_id)
            raise

    async def revise(self, tenant: str, subject: str, fact_id: str, text: object, agent: str | None) -> Position:
        text = self._text(text)
        await self._existing(tenant, subject, fact_id, agent)
        return await self._producer.produce([FactRevised(self._envelope(tenant, subject, agent), fact_id, text)])

    async def forget(self, tenant: str, subject: str, fact_id: str, agent: str | None) -> Position:
        await self._existing(tenant, subject, fact_id, agent)
        return await self._producer.produce([FactForgotten(self._envelope(tenant, subject, agent), fact_id)])

    async def clear(self, tenant: str, subject: str) -> Position:
        return await self._producer.produce([FactsCleared(self._envelope(tenant, subject, None), "cleared")])

    async def _existing(self, tenant: str, subject: str, fact_id: str, agent: str | None) -> Fact:
        check_name("fact_id", fact_id)
        fact = (await self.state(tenant, subject)).find(fact_id)
        if fact is None or not fact.visible_to(agent):
            raise NotFound(f"{subject} has no fact {fact_id}")
        return fact

    async def facts(self, tenant: str, subject: str, agent: str | None) -> list[Fact]:
        return [fact for fact in (await self.state(tenant, subject)).facts if fact.visible_to(agent)]

    async def recall(
        self, tenant: str, subject: str, question: str, agent: str | None, *, shared_only: bool = False
    ) -> list[Recalled]:
        """`shared_only`: a reader that names no agent may see no agent's own facts (the context read)."""
        state = await self.state(tenant, subject)
        if shared_only:
            state = replace(state, facts=tuple(fact for fact in state.facts if fact.scope == "shared"))
        similarity = await self._similarity(state, question, agent) if question.strip() else None
        return recall(
            state,
            question,
            agent=agent,
            now_ms=now_ms(),
            limit=self._policy.recall_limit,
            similarity=similarity,
            min_similarity=self._policy.min_similarity,
        )

    async def search(self, tenant: str, subject: str, query: str, agent: str | None) -> list[Recalled]:
        """The facts the query finds, best first; unlike recall, never the newest ones in place of a match."""
        return [hit for hit in await self.recall(tenant, subject, query, agent) if hit.how != "recent"]

    async def _similarity(self, state: SubjectFacts, question: str, agent: str | None) -> dict[str, float] | None:
        """Cosine of the question with every fact the agent may recall (30 at most, plus none else)."""
        if self._embedder is None:
            return None
        visible = [fact for fact in state.facts if fact.visible_to(agent)]
        stale = [fact for fact in visible if fact.vector_model != self._embedder.name]
        try:
            vectors = await self._embedder.embed([question, *(fact.text for fact in stale)])
        except EmbeddingFailed:
            return None  # still recalls: by keyword
        fresh = {fact.fact_id: vector for fact, vector in zip(stale, vectors[1:], strict=True)}
        return {fact.fact_id: cosine(vectors[0], fresh.get(fact.fact_id, fact.vector)) for fact in visible}

    async def run_tool(
        self,
        tenant: str,
        subject: str,
        agent: str,
        name: str,
        arguments: object,
        *,
        exchange_id: str | None = None,
        call_index: int | None = None,
    ) -> dict[str, Any]:
        """Execute one of TOOL_DEFINITIONS for an agent; the result is what the model reads back.

        With an exchange id (and the call's index in it) the call is logged as a ToolCalled of that
        exchange, so it renders in the transcript (seed 003: "Each call renders in the transcript").
        """
        if exchange_id is not None and call_index is None:
            raise InvalidEvent("call_index", "is needed to record the call in an exchange")
        result = await self._run(tenant, subject, agent, name, arguments)
        if exchange_id is not None and call_index is not None:
            call = ToolCalled(
                self._envelope(tenant, subject, agent),
                exchange_id,
                call_index,
                name,
                json.dumps(arguments, ensure_ascii=False),
                json.dumps(result, ensure_ascii=False),
            )
            result["transcript_position"] = (await self._producer.produce([call])).token()
        return result

    async def _run(self, tenant: str, subject: str, agent: str, name: str, arguments: object) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise InvalidEvent("arguments", "must be a JSON object")
        allowed = {"remember": {"text", "scope"}, "recall": {"query"}, "forget": {"fact_id"}}
        if name not in allowed:
            raise InvalidEvent("name", f"no tool {name!r}; the tools are {', '.join(allowed)}")
        extra = sorted(set(arguments) - allowed[name])
        if extra:
            raise InvalidEvent(f"arguments.{extra[0]}", f"is not an argument of {name}")
        if name == "remember":
            fact_id, position = await self.remember(
                tenant,
                subject,
                arguments.get("text"),
                agent=agent,
                scope=str(arguments.get("scope", "agent")),
                source="agent",
            )
            return {"saved": True, "fact_id": fact_id, "position": position.token()}
        if name == "recall":
            query = check_text("arguments.query", arguments.get("query"))
            return {"facts": [recalled_view(hit) for hit in await self.recall(tenant, subject, query, agent)]}
        fact_id = str(arguments.get("fact_id", ""))
        position = await self.forget(tenant, subject, fact_id, agent)
        return {"forgotten": True, "fact_id": fact_id, "position": position.token()}
