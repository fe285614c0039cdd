"""The context an agent reads before it answers: the thread, folded first when it is urgent, and the facts."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from memlog.app.evidence import Evidence, without_evidence
from memlog.app.memory import Memory, recalled_view
from memlog.app.positions import Positions
from projections.engines import SummarizerFailed
from projections.ports import SessionStore
from projections.ready import ReadyThread, etag
from projections.recall import render
from projections.session import Session, ThreadKey, ThreadPolicy
from schemas.events import SESSION_THREAD, check_name
from streams.folds import FoldService
from streams.metrics import Metrics

log = logging.getLogger(__name__)

EMPTY = ReadyThread.of_session(ThreadKey("", SESSION_THREAD, ""), Session(), "none")  # a thread with nothing in it


@dataclass(frozen=True)
class ThreadContext:
    tenant: str
    subject: str | None
    thread: str
    owner: str
    summary: str
    exchanges: list[dict[str, Any]]
    tokens: int  # the thread's exchanges and summary, counted with tiktoken
    fold_at_tokens: int
    tokens_to_fold: int
    exchanges_to_fold: int
    rendered: str  # between folds it only grows at the end
    facts: list[dict[str, Any]] = field(default_factory=list)  # the facts that bear on the question
    rendered_facts: str = ""
    summary_notice: dict[str, Any] | None = None  # the summary's loss notice; None with no fold recorded


@dataclass(frozen=True)
class ReadyContext:
    """A context read served from the thread's ready context (issue 16): the same content as a
    ThreadContext, with the exchanges and the rendered text as JSON already."""

    tenant: str
    subject: str | None
    thread: str
    owner: str
    ready: ReadyThread
    exchanges_json: bytes  # the ready views with their evidence (seed 004)
    summary_notice: dict[str, Any] | None  # as ThreadContext's
    fold_at_tokens: int
    tokens_to_fold: int
    exchanges_to_fold: int
    state: str  # names the thread's state in its namespace: with the facts, it makes the ETag
    facts: list[dict[str, Any]] = field(default_factory=list)
    rendered_facts: str = ""

    def etag(self, facts_json: bytes) -> str:
        return etag(self.state, self.rendered_facts, facts_json)


class ContextReads:
    """Args:
    sessions: the namespace's threads.
    folds: folds a thread past the urgent threshold before it is read.
    memory: recalls the facts that bear on the question.
    positions: waits for `after` and for an urgent fold to be applied.
    policy: the fold thresholds.
    metrics: latencies of context reads and recalls; None where nothing is measured.
    evidence: joins the tool calls to the runs that served them, and gives each its status; None: neither.
    """

    def __init__(
        self,
        sessions: SessionStore,
        folds: FoldService,
        memory: Memory,
        positions: Positions,
        policy: ThreadPolicy,
        metrics: Metrics | None,
        evidence: Evidence | None = None,
        namespace: str = "",
    ) -> None:
        self._evidence = evidence
        self._namespace = namespace  # in the ETag: another namespace's thread may stand at the same position
        self._sessions = sessions
        self._folds = folds
        self._memory = memory
        self._positions = positions
        self._policy = policy
        self._metrics = metrics
        self._marks_complete = False  # once the namespace's served marks are complete, they stay so

    async def session(
        self,
        tenant: str,
        subject: str,
        *,
        question: str | None,
        agent: str | None,
        after: str | None,
        wait: float | None,
        fill: bool = False,
    ) -> ThreadContext:
        """The subject's session and the best facts for the question (seed 003): the subject's own and
        the tenant's knowledge, those that bear on it first (memlog.memory.Memory.recall)."""
        key = ThreadKey.session(check_name("tenant", tenant), check_name("subject", subject))
        if agent is not None:
            check_name("agent", agent)
        started = time.perf_counter()
        await self._positions.wait_all(after, wait)
        read, (facts, rendered_facts) = await asyncio.gather(
            self.thread(key, after=None, wait=None), self._recall(key, question, agent, fill)
        )
        thread: ThreadContext = read
        if self._metrics is not None:
            self._metrics.context_seconds.labels("session").observe(time.perf_counter() - started)
        return replace(thread, facts=facts, rendered_facts=rendered_facts)

    async def _recall(
        self, key: ThreadKey, question: str | None, agent: str | None, fill: bool
    ) -> tuple[list[dict[str, Any]], str]:
        """The facts' views and their rendered lines. Nothing asked, for an agent: its newest facts, as not
        matched (the strict policy: none). A plain read (no question, no agent) recalls nothing and reads
        no store for it: it is served from Redis alone (issue 38), as is every read unless `fill`."""
        asked = bool((question or "").strip())
        if not fill and not asked and (agent is None or self._memory.recall_policy.strict):
            return [], ""
        recalling = time.perf_counter()
        # seed 003: an agent recalls its own facts and the shared ones; a read naming no agent, the shared only
        found = await self._memory.recall(
            key.tenant, key.owner, question or "", agent, shared_only=agent is None, fill=fill
        )
        if self._metrics is not None:
            self._metrics.recall_seconds.observe(time.perf_counter() - recalling)
        return [recalled_view(hit) for hit in found.hits], render(found.hits, key.owner)

    async def ready_session(
        self,
        tenant: str,
        subject: str,
        *,
        question: str | None,
        agent: str | None,
        after: str | None,
        wait: float | None,
        fill: bool = False,
    ) -> ReadyContext:
        """`session`, served from the thread's ready context."""
        key = ThreadKey.session(check_name("tenant", tenant), check_name("subject", subject))
        if agent is not None:
            check_name("agent", agent)
        started = time.perf_counter()
        await self._positions.wait_all(after, wait)
        # the session (Redis) and the facts (MongoDB, the question's vector) are read at once
        ready, (facts, rendered_facts) = await asyncio.gather(
            self.ready_thread(key, after=None, wait=None), self._recall(key, question, agent, fill)
        )
        thread: ReadyContext = ready
        if self._metrics is not None:
            self._metrics.context_seconds.labels("session").observe(time.perf_counter() - started)
        return replace(thread, facts=facts, rendered_facts=rendered_facts)

    async def ready_public(self, tenant: str, *, after: str | None, wait: float | None) -> ReadyContext:
        return await self.ready_thread(ThreadKey.public(check_name("tenant", tenant)), after=after, wait=wait)

    async def ready_automation(self, tenant: str, agent: str, *, after: str | None, wait: float | None) -> ReadyContext:
        key = ThreadKey.automation(check_name("tenant", tenant), check_name("agent", agent))
        return await self.ready_thread(key, after=after, wait=wait)

    async def ready_thread(self, key: ThreadKey, *, after: str | None, wait: float | None) -> ReadyContext:
        """`thread`, from the ready context: one round trip where the thread keeps it current."""
        await self._positions.wait_all(after, wait)
        ready = await self._sessions.read_ready(key)
        if ready is not None and ready.head.tokens > self._policy.urgent_tokens and await self._fold_urgently(key):
            ready = await self._sessions.read_ready(key)
        ready = ready or EMPTY
        head = ready.head
        exchanges, evidence = await self._ready_evidence(key, ready)
        notice = head.notice(key)
        return ReadyContext(
            tenant=key.tenant,
            subject=key.owner if key.thread == SESSION_THREAD else None,
            thread=key.thread,
            owner=key.owner,
            ready=ready,
            exchanges_json=exchanges,
            summary_notice=None if notice is None else notice.view(),
            fold_at_tokens=self._policy.fold_tokens,
            tokens_to_fold=max(0, self._policy.fold_tokens - head.tokens),
            exchanges_to_fold=max(0, self._policy.fold_exchanges - head.count),
            state=etag(
                self._namespace,
                *key,
                ready.version,
                str(self._policy.fold_tokens),
                str(self._policy.fold_exchanges),
                evidence,
            ),
        )

    async def _ready_evidence(self, key: ThreadKey, ready: ReadyThread) -> tuple[bytes, bytes]:
        """The exchanges' JSON with their evidence, and what the evidence added to the stored views
        (empty when nothing: no run names them and every call has answered; the ETag counts it)."""
        if self._evidence is None:  # as `thread` without evidence: the model's defaults
            return without_evidence(ready.exchanges_json), b""
        marked = await self._served_marks_complete()
        spliced = await self._evidence.ready_exchanges(key.tenant, key.thread, key.owner, ready, marked=marked)
        return (ready.exchanges_json, b"") if spliced is None else (spliced, spliced)

    async def _served_marks_complete(self) -> bool:
        """Whether a thread without a served mark is one no stored run serves (`ServedMarks`)."""
        if not self._marks_complete:
            self._marks_complete = await self._sessions.served_marks_complete()
        return self._marks_complete

    async def _fold_urgently(self, key: ThreadKey) -> bool:
        """seed 000: "Only a session past 42 000 tokens folds before the answer." True once it has."""
        try:
            folded = await self._folds.fold(key, urgent=True)
        except SummarizerFailed as exc:
            log.warning("urgent fold of %s failed; serving it unfolded: %s", key, exc)
            return False
        if folded is None:
            return False
        await self._positions.wait(folded)
        return True

    async def public(self, tenant: str, *, after: str | None, wait: float | None) -> ThreadContext:
        return await self.thread(ThreadKey.public(check_name("tenant", tenant)), after=after, wait=wait)

    async def automation(self, tenant: str, agent: str, *, after: str | None, wait: float | None) -> ThreadContext:
        key = ThreadKey.automation(check_name("tenant", tenant), check_name("agent", agent))
        return await self.thread(key, after=after, wait=wait)

    async def thread(self, key: ThreadKey, *, after: str | None, wait: float | None) -> ThreadContext:
        """Any thread as it stands once `after` is applied; past the urgent threshold it folds first."""
        await self._positions.wait_all(after, wait)
        session = await self._sessions.read(key)
        if session is not None and session.head.tokens > self._policy.urgent_tokens and await self._fold_urgently(key):
            session = await self._sessions.read(key)
        session = session or Session()
        head = session.head
        notice = head.notice(key)
        views = [exchange.view() for exchange in session.exchanges]
        if self._evidence is not None:
            views = await self._evidence.exchanges(key.tenant, key.thread, key.owner, views)
        return ThreadContext(
            tenant=key.tenant,
            subject=key.owner if key.thread == SESSION_THREAD else None,
            thread=key.thread,
            owner=key.owner,
            summary=head.summary_text,  # a shared thread's: its askers' parts
            exchanges=views,
            tokens=head.tokens,
            fold_at_tokens=self._policy.fold_tokens,
            tokens_to_fold=max(0, self._policy.fold_tokens - head.tokens),
            exchanges_to_fold=max(0, self._policy.fold_exchanges - head.count),
            rendered=session.render(key),
            summary_notice=None if notice is None else notice.view(),
        )
