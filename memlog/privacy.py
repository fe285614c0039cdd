"""Erasure and export of one subject across every projection (DESIGN "Erasure, export, replay").

The privacy agent runs these when it applies SubjectErased / SubjectExportRequested; the order of
an erasure is: stop the data key being used, delete everything about the subject, delete the key,
record the erasure in the ledger (counts, never content).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from projections.mongo_archives import MongoConversationArchive, MongoIdempotency
from projections.mongo_store import MongoArchiveStore, MongoFactStore, MongoTraceStore
from projections.position import Position
from projections.privacy_store import MongoExports, MongoKeyVault, MongoLedger
from projections.redis_store import RedisSessionStore
from schemas.events import SESSION_THREAD, Envelope, SubjectErased, SubjectExportRequested
from streams.sealer import Sealer

if TYPE_CHECKING:
    from memlog.services import Services


@dataclass(frozen=True)
class SubjectData:
    """Every store that holds something about subjects, in one namespace, plus the privacy stores."""

    sessions: RedisSessionStore
    facts: MongoFactStore
    traces: MongoTraceStore
    archive: MongoArchiveStore
    conversations: MongoConversationArchive
    idempotency: MongoIdempotency
    exports: MongoExports
    vault: MongoKeyVault
    ledger: MongoLedger
    sealer: Sealer


async def request(
    services: Services,
    kind: Literal["erase", "export"],
    tenant: str,
    subject: str,
    *,
    requested_by: str,
    producer: str,
    reason: str | None = None,
) -> tuple[str, Position]:
    """An operator's erase or export request: logged in the ledger, then put on memlog.privacy.

    The event is built (and so validated) before anything is written. Returns the request id and
    the position the worker's privacy agent must reach.
    """
    request_id = str(uuid.uuid4())
    env = Envelope(tenant=tenant, subject=subject, thread=SESSION_THREAD, producer=producer)
    event: SubjectErased | SubjectExportRequested = (
        SubjectErased(env, request_id, requested_by, reason)
        if kind == "erase"
        else SubjectExportRequested(env, request_id, requested_by)
    )
    await services.ledger.record(
        f"{kind}-requested", tenant=tenant, subject=subject, request_id=request_id, requested_by=requested_by
    )
    return request_id, await services.producer.produce([event])


async def erase(data: SubjectData, tenant: str, subject: str, request_id: str, requested_by: str) -> dict[str, Any]:
    """Erase a subject. Every step is idempotent, so a redelivered request (or one applied again to a
    namespace rebuilt meanwhile) repeats the deletes, and the ledger keeps its first entry.
    Returns the ledger entry."""
    await data.vault.begin_erasure(tenant, subject)
    data.sealer.forget()
    deleted: dict[str, int] = {}
    deleted.update(await data.sessions.erase_subject(tenant, subject))
    deleted["idempotency_keys"] = await data.idempotency.erase_subject(tenant, subject)
    deleted["facts"] = await data.facts.erase_subject(tenant, subject)
    deleted["traces"] = await data.traces.erase_subject(tenant, subject)
    deleted["archived_events"] = await data.archive.erase_subject(tenant, subject)
    deleted["conversation_entries"] = await data.conversations.erase_subject(tenant, subject)  # and search terms
    deleted["exports"] = await data.exports.erase_subject(tenant, subject)
    deleted["data_keys"] = await data.vault.delete(tenant, subject)
    data.sealer.forget()
    await data.ledger.record(
        "erased",
        entry_id=request_id,
        tenant=tenant,
        subject=subject,
        requested_by=requested_by,
        deleted=deleted,
    )
    entry = await data.ledger.get(request_id)
    assert entry is not None
    return entry


async def bundle(data: SubjectData, tenant: str, subject: str) -> dict[str, Any]:
    """Everything memlog holds about a subject, as one JSON-ready document."""
    threads = await data.sessions.export_subject(tenant, subject)
    return {
        "tenant": tenant,
        "subject": subject,
        "exported_at": dt.datetime.now(dt.UTC).isoformat(),
        "session": threads["session"],
        "shared_thread_lines": threads["shared_thread_lines"],
        "facts": await data.facts.export_subject(tenant, subject),
        "traces": await data.traces.export_subject(tenant, subject),
        "archives": await data.archive.export_subject(tenant, subject),
        "conversations": await data.conversations.export_subject(tenant, subject),
        "idempotency_keys": await data.idempotency.export_subject(tenant, subject),
        "erasures": [
            {"request_id": e["_id"], "at": e["at"], "deleted": e.get("deleted", {})}
            for e in await data.ledger.entries(tenant=tenant, subject=subject, kind="erased")
        ],
    }


async def export(data: SubjectData, tenant: str, subject: str, request_id: str, requested_by: str) -> None:
    if await data.exports.get(request_id) is not None:
        return  # made already: a redelivered request
    content = await bundle(data, tenant, subject)
    text = json.dumps(content, default=_plain, ensure_ascii=False, sort_keys=True)
    await data.exports.put(request_id, tenant, subject, text)
    await data.ledger.record(
        "exported", entry_id=f"export:{request_id}", tenant=tenant, subject=subject, requested_by=requested_by
    )


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"{type(value).__name__} is not JSON")
