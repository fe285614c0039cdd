"""A subject's data in the in-memory stores: planted, and everything held about it read back; and the
in-memory namespace those stores make (`InMemoryNamespace`), from which the tests take their `SubjectData`
through `SubjectData.of`, as the worker does, so the list of a subject's stores stays in one place."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator

from memlog.adapters.in_memory import (
    InMemoryConversationArchive,
    InMemoryExports,
    InMemoryFactSlots,
    InMemoryFactStore,
    InMemoryIdempotency,
    InMemoryKeyVault,
    InMemoryLedger,
    InMemoryReceiptStore,
    InMemorySessionStore,
    InMemoryTraceStore,
)
from projections.archives import plan_archive
from projections.facts import Fact, SubjectFacts
from projections.ports import ConversationArchive, FactSlots, FactStore, Idempotency, KeyVault, SessionStore, TraceStore
from projections.position import Position
from projections.receipts import ReceiptStore, receipt_document
from projections.redaction import Redactor
from projections.session import Exchange, Segment, SessionChange, SessionWrite, ThreadKey
from projections.traces import trace_document
from schemas.events import Envelope, QuestionAsked, ReceiptRecorded, RunTraced
from streams.sealer import Sealer
from streams.steps.privacy import OtherNamespaces, SubjectData

T0 = 1_795_000_000_000

DAY_MS = 86_400_000


@dataclasses.dataclass
class InMemoryNamespace:
    """One namespace's stores that hold something about subjects, in memory (a `NamespaceData`)."""

    sessions: SessionStore = dataclasses.field(default_factory=InMemorySessionStore)
    facts: FactStore = dataclasses.field(default_factory=InMemoryFactStore)
    traces: TraceStore = dataclasses.field(default_factory=InMemoryTraceStore)
    conversations: ConversationArchive = dataclasses.field(default_factory=InMemoryConversationArchive)
    idempotency: Idempotency = dataclasses.field(default_factory=lambda: InMemoryIdempotency(86_400))
    fact_slots: FactSlots | None = dataclasses.field(default_factory=InMemoryFactSlots)
    receipts: ReceiptStore | None = dataclasses.field(default_factory=InMemoryReceiptStore)

    def empty(self) -> None:
        """Every store fresh, as dropping the namespace's database and keys leaves it."""
        fresh = InMemoryNamespace()
        for field in dataclasses.fields(InMemoryNamespace):
            setattr(self, field.name, getattr(fresh, field.name))


def subject_data(
    namespace: InMemoryNamespace | None = None,
    *,
    vault: KeyVault | None = None,
    sealer: Sealer | None = None,
    part_bytes: int = 4 * 1024 * 1024,
    others: OtherNamespaces | None = None,
) -> SubjectData:
    """A namespace's subject stores (fresh ones unless given) with in-memory privacy stores (export bundles
    in parts of `part_bytes`)."""
    vault = vault or InMemoryKeyVault(os.urandom(32))
    return SubjectData.of(
        namespace or InMemoryNamespace(),
        exports=InMemoryExports(part_bytes),
        vault=vault,
        ledger=InMemoryLedger(os.urandom(32)),
        sealer=sealer or Sealer(vault),
        others=others,
    )


async def nothing_held() -> list[str]:
    return []


async def chunks(*pieces: bytes) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


async def remember(data: SubjectData, subject: str, offset: int, text: str = "") -> None:
    """One of everything memlog keeps about a subject, at log offset `offset` and after."""
    env = Envelope(tenant="castle", subject=subject, thread="session", producer="test", occurred_at=T0)
    exchange = Exchange(f"x{offset}", f"{subject} asks", tokens=3, subject=subject)
    writes = [
        SessionWrite(
            Position("threads", 0, offset), key, SessionChange(exchange, False, 3, T0, T0 + DAY_MS, count_delta=1)
        )
        for key in [ThreadKey.session("castle", subject), ThreadKey.public("castle")]
    ]
    part = Segment(subject, f"{subject} asked before", 3, T0)
    fold = SessionChange(None, False, 3, T0, T0 + DAY_MS, segment=part)
    writes.append(SessionWrite(Position("threads", 0, offset + 1), ThreadKey.public("castle"), fold))
    await data.sessions.write(writes, T0)
    await data.fact_slots.reserve("castle", subject, f"f{offset}", nothing_held, 30)
    fact = Fact(f"f{offset}", "shared", None, text or f"{subject} likes tea", "subject", T0, T0)
    await data.facts.write("castle", subject, SubjectFacts((fact,), T0, T0 + DAY_MS), Position("facts", 0, offset))
    run = RunTraced(env, f"run-{subject}" + (f"-{offset}" if offset else ""), "ok", T0, T0)
    await data.traces.append([trace_document(run, Redactor.build(), 7)])
    if data.receipts is not None:
        receipt = ReceiptRecorded(env, f"rc-{subject}", f"x{offset}", 0, "passed", f"{subject}'s chest holds 3 keys")
        await data.receipts.append([receipt_document(receipt, Position("traces", 0, offset), Redactor.build(), 7)])
    question = QuestionAsked(env, f"x{offset}", f"{subject} asks")
    await data.conversations.apply(plan_archive([(question, Position("threads", 0, offset))]))
    await data.idempotency.reserve("castle", "session", subject, f"k{offset}", subject)
    await data.exports.put(f"old-export-{subject}", "castle", subject, chunks(b"{}"))
    await data.vault.key_for_write("castle", subject)


async def everything_about(data: SubjectData, subject: str) -> list[object]:
    threads = await data.sessions.export_subject("castle", subject)
    return [
        threads["session"],
        threads["shared_thread_lines"],
        threads["shared_thread_summaries"],
        await data.facts.export_subject("castle", subject),
        await data.traces.export_subject("castle", subject),
        await data.conversations.export_subject("castle", subject),
        await data.idempotency.export_subject("castle", subject),
        await data.receipts.export_subject("castle", subject) if data.receipts is not None else [],
        await data.exports.get(f"old-export-{subject}"),
    ]
