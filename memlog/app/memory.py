"""The lasting memory's commands and reads, shared by the HTTP API, the CLI and the agent's tools.

A subject's facts and the tenant's own knowledge (`subject=None`) are written the same way: as fact
events on the facts topic, validated here first. Recall ranks both together (projections/recall.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from memlog.app.positions import Ready, at_once
from projections.archives import decode_cursor, encode_cursor
from projections.cursors import Cursors, number, text, whole
from projections.engines import EmbeddingFailed, QuestionEncoding
from projections.facts import TENANT_KNOWLEDGE, Fact, FactPolicy, SubjectFacts, shown_source
from projections.forgetting import forgotten_calls
from projections.paging import list_binding
from projections.ports import FactSlots, FactStore, SessionStore
from projections.position import Position
from projections.recall import (
    Candidate,
    PageKey,
    Part,
    Recalled,
    RecallPolicy,
    candidates,
    combined,
    cosine,
    offer,
    page,
    recent,
    texts_to_score,
)
from projections.session import ThreadKey
from schemas.errors import Forbidden, InvalidEvent, NotFound
from schemas.events import (
    FACT_SCOPES,
    PUBLIC_THREAD,
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
from schemas.session_text import count_of, tool_call_text
from streams.producer import EventProducer

log = logging.getLogger(__name__)

MAX_EXCLUDE = 1_000  # ids a recall may be told to skip
MAX_STALE_AT_READ = 32  # facts without this model's vector embedded during a read; the rest by their words


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
                        "enum": [*FACT_SCOPES, "tenant"],
                        "description": "agent: only you recall it; shared: every agent of this tenant does; "
                        "tenant: not about this user but knowledge of the whole tenant, recalled for every user "
                        "(where the tenant allows agents to save it).",
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
            "description": "Look up lasting facts about the user, and the tenant's knowledge, beyond those already "
            "supplied with the context. Returns the best matches first; each says whether it bears on the query "
            "(bears), and the others you hold follow, marked as not matched.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many."},
                    "exclude": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Fact ids you already have (those supplied with the context): skipped.",
                    },
                    "cursor": {"type": "string", "description": "next_cursor of a previous call: the next ones."},
                },
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


def described(name: str) -> str:
    """A tool's description as `/v1/tools` gives it: one wording on every face, the MCP servers' too (seed
    000: the agent saves facts itself and says so, because the description tells it to)."""
    return next(str(tool["function"]["description"]) for tool in TOOL_DEFINITIONS if tool["function"]["name"] == name)


def recalled_view(hit: Recalled) -> dict[str, Any]:
    view = {**hit.fact.view(), "score": round(hit.score, 4), "how": hit.how, "bears": hit.bears}
    return {**view, "belongs_to": hit.belongs_to, "source": shown_source(hit.fact.source, hit.belongs_to)}


@dataclass(frozen=True)
class RecallPage:
    hits: list[Recalled]
    next_cursor: str | None = None


def _cosines(question: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    try:
        import numpy as np
    except ImportError:  # an OpenAI-compatible model without the embeddings extra
        return [cosine(question, vector) for vector in vectors]
    if not vectors:
        return []
    matrix = np.asarray(vectors, dtype=np.float64)
    q = np.asarray(question, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
    return [float(v) for v in (matrix @ q) / np.where(norms == 0, 1.0, norms)]


def named(tenant: str, subject: str | None, agent: str | None = None) -> None:
    """The names a fact command or read acts for, by the name rule (`subject=None`: the tenant's knowledge;
    `agent=None`: no agent): checked at its entry, before it waits, claims or writes anything."""
    check_name("tenant", tenant)
    if subject is not None:
        check_name("subject", subject)
    if agent is not None:
        check_name("agent", agent)


def agent_names(tenant: object, subject: object, agent: object) -> tuple[str, str, str]:
    """The tenant, subject and agent an agent's memory tools act for, by the name rule: the MCP endpoint
    binds a request to them, and checks them here before it looks at the credential."""
    return check_name("tenant", tenant), check_name("subject", subject), check_name("agent", agent)


def _cursor_key(position: list[Any]) -> PageKey:
    return (
        whole(position[0]),
        whole(position[1]),
        number(position[2]),
        whole(position[3]),
        text(position[4]),
        text(position[5]),
    )


class Memory:
    """Validate, produce, read. Refusals name the problem and produce nothing.

    Args:
        tenant_writers: tenants whose agents may save tenant knowledge with remember (`*`: every one).
        agents_forget_backend: an agent's forget may delete tenant knowledge the backend wrote
            (MEMLOG_AGENTS_FORGET_BACKEND_KNOWLEDGE); otherwise only what an agent saved.
        transcripts: the sessions, where a forgotten fact's remember call loses its text (None: left).
        cursors: seals and opens the cursors of recall and search.
    """

    def __init__(
        self,
        producer: EventProducer,
        store: FactStore,
        policy: FactPolicy,
        producer_name: str,
        embedder: QuestionEncoding | None = None,
        *,
        slots: FactSlots,
        recall_policy: RecallPolicy | None = None,
        tenant_writers: Collection[str] = (),
        transcripts: SessionStore | None = None,
        cursors: Cursors,
        agents_forget_backend: bool = False,
    ) -> None:
        self._producer = producer
        self._transcripts = transcripts
        self._store = store
        self._policy = policy
        self._recall = recall_policy or RecallPolicy()
        self._producer_name = producer_name
        # the read path's encoder (memlog.adapters.embeddings.QuestionEncoder): a question cache and one encoder
        # shared by concurrent reads
        self._embedder = embedder
        self._slots = slots
        self._tenant_writers = frozenset(tenant_writers)
        self._cursors = cursors
        self._agents_forget_backend = agents_forget_backend

    @property
    def producer(self) -> EventProducer:
        return self._producer

    @property
    def recall_policy(self) -> RecallPolicy:
        return self._recall

    def agents_may_write_knowledge(self, tenant: str) -> bool:
        return "*" in self._tenant_writers or tenant in self._tenant_writers

    def envelope(self, tenant: str, subject: str | None, agent: str | None) -> Envelope:
        """A fact event's envelope: a subject's in its session, the tenant's own in its public thread."""
        thread = PUBLIC_THREAD if subject is None else SESSION_THREAD
        return Envelope(tenant=tenant, subject=subject, agent=agent, thread=thread, producer=self._producer_name)

    def _text(self, text: object) -> str:
        value = check_utf8("text", check_text("text", text)).strip()  # a fact keeps no original to fall back on
        if not value:
            raise InvalidEvent("text", "must not be blank")
        if len(value) > self._policy.max_chars:
            raise InvalidEvent("text", f"is {len(value)} characters; a fact is at most {self._policy.max_chars}")
        return value

    @staticmethod
    def _owner(subject: str | None) -> str:
        return TENANT_KNOWLEDGE if subject is None else subject

    async def state(self, tenant: str, subject: str | None) -> SubjectFacts:
        """The subject's facts; with `subject=None`, the tenant's own knowledge."""
        state = await self._store.load(tenant, self._owner(subject))
        if state is None or not state.alive(now_ms()):
            return SubjectFacts()
        return state

    async def remember(
        self, tenant: str, subject: str | None, text: object, *, agent: str | None, scope: str | None, source: str
    ) -> tuple[str, Position]:
        """Save a fact; without a scope it is the agent's own when an agent saves it, else shared.
        `subject=None`: into the tenant's knowledge."""
        check_name("tenant", tenant)
        text = self._text(text)
        if scope is None:
            scope = "agent" if agent else "shared"
        if scope not in FACT_SCOPES:
            raise InvalidEvent("scope", f"must be one of {', '.join(FACT_SCOPES)}, not {scope!r}")
        fact_id = str(uuid.uuid4())
        event = FactRemembered(self.envelope(tenant, subject, agent), fact_id, scope, text, source)
        most, _ = self._policy.limits(subject is None)
        owner = self._owner(subject)

        # Reserved at acceptance, not read from the projection alone: it may not have applied the
        # saves just accepted, and a 202 must mean the fact will be kept.
        async def held() -> set[str]:
            return {fact.fact_id for fact in (await self.state(tenant, subject)).facts}

        if not await self._slots.reserve(tenant, owner, fact_id, held, most):
            whose = subject if subject is not None else f"the tenant {tenant}'s knowledge"
            raise InvalidEvent(
                "facts",
                f"{whose} has {most} facts saved or being saved, the most kept; "
                "forget or revise one before remembering more",
            )
        try:
            return fact_id, await self._producer.produce([event])
        except BaseException:
            await self._slots.release(tenant, owner, fact_id)
            raise

    async def revise(
        self, tenant: str, subject: str | None, fact_id: str, text: object, agent: str | None, *, ready: Ready = at_once
    ) -> Position:
        """Edit a fact; `ready`: the wait for what the request has just written, once its names are checked."""
        named(tenant, subject)
        await ready()
        text = self._text(text)
        await self._existing(tenant, subject, fact_id, agent)
        return await self._producer.produce([FactRevised(self.envelope(tenant, subject, agent), fact_id, text)])

    async def forget(
        self, tenant: str, subject: str | None, fact_id: str, agent: str | None, *, ready: Ready = at_once
    ) -> Position:
        return (await self.forget_everywhere(tenant, subject, fact_id, agent, ready=ready))[0]

    async def forget_everywhere(
        self, tenant: str, subject: str | None, fact_id: str, agent: str | None, *, ready: Ready = at_once
    ) -> tuple[Position, Position | None]:
        """Delete a fact, and its text from the session's copy of the remember call that saved it.

        Returns the fact's position and the transcript's (None when no recorded call saved it).
        """
        named(tenant, subject)
        await ready()
        await self._existing(tenant, subject, fact_id, agent)
        position = await self._producer.produce([FactForgotten(self.envelope(tenant, subject, agent), fact_id)])
        return position, await self._forget_in_transcript(tenant, subject, {fact_id})

    async def clear(self, tenant: str, subject: str | None) -> Position:
        named(tenant, subject)
        position = await self._producer.produce([FactsCleared(self.envelope(tenant, subject, None), "cleared")])
        await self._forget_in_transcript(tenant, subject, None)
        return position

    async def _forget_in_transcript(
        self, tenant: str, subject: str | None, fact_ids: set[str] | None
    ) -> Position | None:
        """Record the subject's remember calls of `fact_ids` (None: all) again, their text a marker.

        Seed 003: a deleted memory influences no later turn, so the next prompt must not hold it. The
        tenant's knowledge is saved from any subject's session; only a subject's own is found here.
        """
        if self._transcripts is None or subject is None:
            return None
        calls = forgotten_calls(await self._transcripts.read(ThreadKey.session(tenant, subject)), fact_ids)
        if not calls:
            return None
        events = [
            ToolCalled(
                self.envelope(tenant, subject, None),
                call.exchange_id,
                call.call_index,
                "remember",
                call.arguments,
                call.result,
                call.ok,
                call.duration_ms,
                tokens=count_of(tool_call_text("remember", call.arguments, call.result), self._producer.count_tokens),
            )
            for call in calls
        ]
        return await self._producer.produce(events)

    async def _existing(self, tenant: str, subject: str | None, fact_id: str, agent: str | None) -> Fact:
        check_name("fact_id", fact_id)
        fact = (await self.state(tenant, subject)).find(fact_id)
        if fact is None or not fact.visible_to(agent):
            whose = subject if subject is not None else f"the tenant {tenant}"
            raise NotFound(f"{whose} has no fact {fact_id}")
        return fact

    async def facts(self, tenant: str, subject: str | None, agent: str | None, *, ready: Ready = at_once) -> list[Fact]:
        """The facts the agent may see (all of them without an agent); `ready` as for revise."""
        named(tenant, subject, agent)
        await ready()
        return [fact for fact in (await self.state(tenant, subject)).facts if fact.visible_to(agent)]

    async def pool(self, tenant: str, subject: str | None, agent: str | None, *, shared_only: bool) -> list[Candidate]:
        """What a recall ranks: the subject's facts and the tenant's knowledge the asker may see.
        With `subject=None`, the tenant's knowledge alone."""
        now = now_ms()
        if subject is None:
            knowledge = await self.state(tenant, None)
            return candidates(None, knowledge, agent=agent, now_ms=now, shared_only=shared_only)
        own, knowledge = await asyncio.gather(self.state(tenant, subject), self.state(tenant, None))
        return candidates(own, knowledge, agent=agent, now_ms=now, shared_only=shared_only)

    async def recall(
        self,
        tenant: str,
        subject: str | None,
        question: str,
        agent: str | None,
        *,
        shared_only: bool = False,
        limit: int | None = None,
        exclude: Collection[str] = (),
        cursor: str | None = None,
        fill: bool = False,
        route: str = "recall",
    ) -> RecallPage:
        """The best `limit` facts the asker may see, best first: those that bear on the question (at or
        above the floor), then the others the model finds nearest, then the newest, each labelled
        (`bears`, `how`). With the strict policy, only those that bear (none when none does), and with
        `fill` the newest others after them, marked "recent". `shared_only`: a reader that names no
        agent may see no agent's own facts. `route`: what the cursor is bound to besides the question
        (the recall tool's, or a facts search's)."""
        limit = self._recall.limit if limit is None else limit
        if not 1 <= limit <= 100:
            raise InvalidEvent("limit", f"must be from 1 to 100, not {limit}")
        if len(exclude) > MAX_EXCLUDE:
            raise InvalidEvent("exclude", f"lists {len(exclude)} ids; at most {MAX_EXCLUDE}")
        bound = list_binding(route, tenant, subject, agent, shared_only, question, sorted(exclude), fill)
        after = None if cursor is None else _cursor_key(decode_cursor(self._cursors, cursor, bound, 6)[1])
        texts = texts_to_score(question)  # none for a vague question: nothing to encode
        if self._embedder is not None and question.strip() and texts:
            # the question's vectors are computed (or found in the cache) while the facts load
            pool, vectors = await asyncio.gather(
                self.pool(tenant, subject, agent, shared_only=shared_only),
                asyncio.gather(*(self._question(text) for text in texts)),
            )
            parts = await self._parts(pool, texts, vectors)
        else:
            pool = await self.pool(tenant, subject, agent, shared_only=shared_only)
            parts = [(text, None) for text in texts]
        scored = combined(pool, parts, self._recall)
        if not self._recall.strict:
            hits, last = page(offer(pool, scored, self._recall), limit=limit, exclude=exclude, after=after)
            return RecallPage(hits, None if last is None else encode_cursor(self._cursors, bound, 0, list(last)))
        ranked = [hit for hit in scored if hit.bears]
        hits, last = page(ranked, limit=limit, exclude=exclude, after=after)
        if fill and after is None and len(hits) < limit:
            taken = {hit.fact.fact_id for hit in ranked} | set(exclude)
            hits += recent(pool, limit - len(hits), taken)
        return RecallPage(hits, None if last is None else encode_cursor(self._cursors, bound, 0, list(last)))

    async def search(
        self,
        tenant: str,
        subject: str | None,
        query: str,
        agent: str | None,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        ready: Ready = at_once,
    ) -> RecallPage:
        """The facts the query finds, as recall gives them (the strict policy: only those that bear);
        `ready` as for revise."""
        named(tenant, subject, agent)
        await ready()
        return await self.recall(tenant, subject, query, agent, limit=limit, cursor=cursor, route="facts")

    async def _question(self, question: str) -> list[float] | None:
        assert self._embedder is not None
        try:
            return await self._embedder.vector(question)
        except EmbeddingFailed as exc:
            log.warning("recall ranks by words alone: %s", exc)
            return None

    async def _parts(
        self, pool: Sequence[Candidate], texts: Sequence[str], vectors: Sequence[list[float] | None]
    ) -> list[Part]:
        """Each text (the question and its clauses) with its cosines; by words alone where a vector is missing."""
        found = [vector for vector in vectors if vector is not None]
        facts = await self._fact_vectors(pool) if found else None
        if facts is None:
            return [(text, None) for text in texts]
        ids = [fact_id for fact_id, _ in facts]
        matrix = [vector for _, vector in facts]
        return [
            (text, None if vector is None else dict(zip(ids, _cosines(vector, matrix), strict=True)))
            for text, vector in zip(texts, vectors, strict=True)
        ]

    async def _fact_vectors(self, pool: Sequence[Candidate]) -> list[tuple[str, Sequence[float]]] | None:
        """Each candidate that has (or gets now) this model's vector; None when the model fails (then
        recall ranks by words alone, and nothing is lost)."""
        assert self._embedder is not None
        name = self._embedder.name
        stale = [fact for fact, _ in pool if fact.vector_model != name][:MAX_STALE_AT_READ]
        try:
            vectors = await self._embedder.embed([fact.text for fact in stale]) if stale else []
        except EmbeddingFailed as exc:
            log.warning("recall ranks by words alone: %s", exc)
            return None
        fresh = {fact.fact_id: vector for fact, vector in zip(stale, vectors, strict=True)}
        return [
            (fact.fact_id, fresh.get(fact.fact_id) or fact.vector)  # as stored: numpy reads it once
            for fact, _ in pool
            if fact.fact_id in fresh or fact.vector_model == name
        ]

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
        named(tenant, subject, agent)
        if exchange_id is not None and call_index is None:
            raise InvalidEvent("call_index", "is needed to record the call in an exchange")
        result = await self._run(tenant, subject, agent, name, arguments)
        if exchange_id is not None and call_index is not None:
            arguments_text = json.dumps(arguments, ensure_ascii=False)
            result_text = json.dumps(result, ensure_ascii=False)
            call = ToolCalled(
                self.envelope(tenant, subject, agent),
                exchange_id,
                call_index,
                name,
                arguments_text,
                result_text,
                tokens=count_of(tool_call_text(name, arguments_text, result_text), self._producer.count_tokens),
            )
            result["transcript_position"] = (await self._producer.produce([call])).token()
        return result

    async def _run(self, tenant: str, subject: str, agent: str, name: str, arguments: object) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise InvalidEvent("arguments", "must be a JSON object")
        allowed = {
            "remember": {"text", "scope"},
            "recall": {"query", "limit", "exclude", "cursor"},
            "forget": {"fact_id"},
        }
        if name not in allowed:
            raise InvalidEvent("name", f"no tool {name!r}; the tools are {', '.join(allowed)}")
        extra = sorted(set(arguments) - allowed[name])
        if extra:
            raise InvalidEvent(f"arguments.{extra[0]}", f"is not an argument of {name}")
        if name == "remember":
            return await self._remember_tool(tenant, subject, agent, arguments)
        if name == "recall":
            return await self._recall_tool(tenant, subject, agent, arguments)
        fact_id = check_text("arguments.fact_id", arguments.get("fact_id", ""))
        whose: str | None = subject
        if not (await self.state(tenant, subject)).find(fact_id) and self.agents_may_write_knowledge(tenant):
            knowledge = (await self.state(tenant, None)).find(fact_id)
            if knowledge is not None:
                whose = None  # the tenant's knowledge, which this tenant lets its agents keep
                if knowledge.source != "agent" and not self._agents_forget_backend:
                    raise Forbidden(
                        f"tenant knowledge {fact_id} was written by the backend: an agent forgets only what an "
                        "agent saved (MEMLOG_AGENTS_FORGET_BACKEND_KNOWLEDGE)"
                    )
        position = await self.forget(tenant, whose, fact_id, agent)
        return {"forgotten": True, "fact_id": fact_id, "position": position.token()}

    async def _remember_tool(self, tenant: str, subject: str, agent: str, arguments: dict[str, Any]) -> dict[str, Any]:
        scope = check_text("arguments.scope", arguments.get("scope", "agent"))
        whose: str | None = subject
        if scope == "tenant":
            if not self.agents_may_write_knowledge(tenant):
                raise InvalidEvent(
                    "arguments.scope",
                    f"tenant {tenant} does not let agents save tenant knowledge (MEMLOG_TENANT_FACTS_FROM_AGENTS)",
                )
            whose, scope = None, "shared"
        fact_id, position = await self.remember(
            tenant, whose, arguments.get("text"), agent=agent, scope=scope, source="agent"
        )
        return {
            "saved": True,
            "fact_id": fact_id,
            "position": position.token(),
            "belongs_to": "tenant" if whose is None else "subject",
        }

    async def _recall_tool(self, tenant: str, subject: str, agent: str, arguments: dict[str, Any]) -> dict[str, Any]:
        query = check_text("arguments.query", arguments.get("query"))
        limit = arguments.get("limit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise InvalidEvent("arguments.limit", "must be an integer from 1 to 100")
        exclude = arguments.get("exclude", [])
        if not isinstance(exclude, list) or not all(isinstance(item, str) for item in exclude):
            raise InvalidEvent("arguments.exclude", "must be a list of fact ids")
        cursor = arguments.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise InvalidEvent("arguments.cursor", "must be the next_cursor of a previous recall")
        found = await self.recall(tenant, subject, query, agent, limit=limit, exclude=exclude, cursor=cursor)
        return {"facts": [recalled_view(hit) for hit in found.hits], "next_cursor": found.next_cursor}
