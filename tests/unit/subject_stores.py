"""A subject's data in the in-memory stores: planted, and everything held about it read back."""

from __future__ import annotations

from collections.abc import AsyncIterator

from projections.archives import plan_archive
from projections.facts import Fact, SubjectFacts
from projections.position import Position
from projections.receipts import receipt_document
from projections.redaction import Redactor
from projections.session import Exchange, Segment, SessionChange, SessionWrite, ThreadKey
from projections.traces import trace_document
from schemas.events import Envelope, QuestionAsked, ReceiptRecorded, RunTraced
from streams.steps.privacy import SubjectData

T0 = 1_795_000_000_000

DAY_MS = 86_400_000


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
