"""The privacy step: SubjectErased and SubjectExportRequested on memlog.privacy.

Erasure and export of one subject across every projection (DESIGN "Erasure, export, replay"). The
order of an erasure is: stop the data key being used, delete everything about the subject in this
namespace and in every other one the registry knows (previous, building, abandoned), delete the key,
record the erasure in the ledger (counts, never content).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from projections.ports import (
    Checkpoints,
    ConversationArchive,
    Exports,
    FactSlots,
    FactStore,
    Idempotency,
    KeyVault,
    Ledger,
    SessionStore,
    TraceStore,
)
from projections.position import Position
from projections.receipts import ReceiptStore
from schemas.events import PrivacyEvent, SubjectErased
from streams.metrics import Metrics
from streams.projector import advance_past
from streams.sealer import Sealer

log = logging.getLogger(__name__)


class NamespaceData(Protocol):
    """The stores of one namespace that hold something about subjects (projections.stores.Stores is one)."""

    @property
    def sessions(self) -> SessionStore: ...
    @property
    def facts(self) -> FactStore: ...
    @property
    def traces(self) -> TraceStore: ...
    @property
    def conversations(self) -> ConversationArchive: ...
    @property
    def idempotency(self) -> Idempotency: ...
    @property
    def fact_slots(self) -> FactSlots | None: ...
    @property
    def receipts(self) -> ReceiptStore | None: ...


OtherNamespaces = Callable[[], Awaitable[dict[str, NamespaceData]]]


@dataclass(frozen=True)
class SubjectData:
    """Every store that holds something about subjects, in one namespace, plus the privacy stores.

    `others` opens the stores of every other namespace that exists, by name: an erasure reaches them too.
    """

    sessions: SessionStore
    facts: FactStore
    traces: TraceStore
    conversations: ConversationArchive
    idempotency: Idempotency
    exports: Exports
    vault: KeyVault
    ledger: Ledger
    sealer: Sealer
    others: OtherNamespaces | None = None
    fact_slots: FactSlots | None = None  # the API's reservations of facts being accepted
    receipts: ReceiptStore | None = None  # seed 004's receipts (the trace projection writes them)

    @classmethod
    def of(
        cls,
        stores: NamespaceData,
        *,
        exports: Exports,
        vault: KeyVault,
        ledger: Ledger,
        sealer: Sealer,
        others: OtherNamespaces | None = None,
    ) -> SubjectData:
        """A namespace's subject stores (`NamespaceData`, the one list of them) with the privacy stores."""
        return cls(
            sessions=stores.sessions,
            facts=stores.facts,
            traces=stores.traces,
            conversations=stores.conversations,
            idempotency=stores.idempotency,
            exports=exports,
            vault=vault,
            ledger=ledger,
            sealer=sealer,
            others=others,
            fact_slots=stores.fact_slots,
            receipts=stores.receipts,
        )


async def erase_in(stores: NamespaceData, tenant: str, subject: str) -> dict[str, int]:
    """Delete everything about a subject from one namespace's stores; the counts, by store."""
    deleted: dict[str, int] = {}
    deleted.update(await stores.sessions.erase_subject(tenant, subject))
    deleted["idempotency_keys"] = await stores.idempotency.erase_subject(tenant, subject)
    deleted["facts"] = await stores.facts.erase_subject(tenant, subject)
    deleted["traces"] = await stores.traces.erase_subject(tenant, subject)
    deleted["conversation_entries"] = await stores.conversations.erase_subject(tenant, subject)  # and search terms
    if stores.fact_slots is not None:
        deleted["fact_slots"] = await stores.fact_slots.erase_subject(tenant, subject)
    if stores.receipts is not None:
        deleted["receipts"] = await stores.receipts.erase_subject(tenant, subject)
    return deleted


async def erase(data: SubjectData, tenant: str, subject: str, request_id: str, requested_by: str) -> dict[str, Any]:
    """Erase a subject. Every step is idempotent, so a redelivered request (or one applied again to a
    namespace rebuilt meanwhile) repeats the deletes, and the ledger keeps its first entry.
    Returns the ledger entry."""
    await data.vault.begin_erasure(tenant, subject)
    began = data.sealer.forget()
    deleted = await erase_in(data, tenant, subject)
    elsewhere = {}
    for namespace, stores in (await data.others() if data.others is not None else {}).items():
        elsewhere[namespace] = sum((await erase_in(stores, tenant, subject)).values())
    deleted["exports"] = await data.exports.erase_subject(tenant, subject)
    deleted["data_keys"] = await data.vault.delete(tenant, subject)
    data.sealer.forget()
    # a projection batch of this process that opened the subject's events before their key stopped
    # being served may write them after the deletes above (into this namespace, the one it writes):
    # once those batches are done, delete again
    await data.sealer.settled(began)
    for name, count in (await erase_in(data, tenant, subject)).items():
        deleted[name] += count
    await data.ledger.record(
        "erased",
        entry_id=request_id,
        tenant=tenant,
        subject=subject,
        requested_by=requested_by,
        deleted=deleted,
        deleted_elsewhere=elsewhere,  # other namespaces: what went from each, in all
    )
    entry = await data.ledger.get(request_id)
    assert entry is not None
    return entry


async def bundle_sections(data: SubjectData, tenant: str, subject: str) -> AsyncIterator[tuple[str, Any]]:
    """Everything memlog holds about a subject, section by section, in the order of their names."""
    threads: dict[str, Any] = {}

    async def thread(name: str) -> Any:
        if not threads:
            threads.update(await data.sessions.export_subject(tenant, subject))
        return threads[name]

    async def erasures() -> list[dict[str, Any]]:
        return [
            {"request_id": e["_id"], "at": e["at"], "deleted": e.get("deleted", {})}
            for e in await data.ledger.entries(tenant=tenant, subject=subject, kind="erased")
        ]

    async def now() -> str:
        return dt.datetime.now(dt.UTC).isoformat()

    async def fixed(value: str) -> str:
        return value

    async def receipts() -> list[dict[str, Any]]:
        return [] if data.receipts is None else await data.receipts.export_subject(tenant, subject)

    sections: dict[str, Callable[[], Awaitable[Any]]] = {
        "conversations": lambda: data.conversations.export_subject(tenant, subject),
        "erasures": erasures,
        "exported_at": now,
        "facts": lambda: data.facts.export_subject(tenant, subject),
        "idempotency_keys": lambda: data.idempotency.export_subject(tenant, subject),
        "receipts": receipts,
        "session": lambda: thread("session"),
        "shared_thread_lines": lambda: thread("shared_thread_lines"),
        "shared_thread_summaries": lambda: thread("shared_thread_summaries"),
        "subject": lambda: fixed(subject),
        "tenant": lambda: fixed(tenant),
        "traces": lambda: data.traces.export_subject(tenant, subject),
    }
    for name in sorted(sections):
        yield name, await sections[name]()


async def bundle(data: SubjectData, tenant: str, subject: str) -> dict[str, Any]:
    """Everything memlog holds about a subject, as one JSON-ready document."""
    return {name: value async for name, value in bundle_sections(data, tenant, subject)}


async def bundle_chunks(data: SubjectData, tenant: str, subject: str) -> AsyncIterator[bytes]:
    """The bundle as UTF-8 JSON text, one section at a time, exactly as `json.dumps(bundle, sort_keys=True)`
    writes it: however heavy the subject, no copy of the whole text is ever held at once."""
    yield b"{"
    separator = ""
    async for name, value in bundle_sections(data, tenant, subject):
        text = json.dumps(value, default=_plain, ensure_ascii=False, sort_keys=True)
        # a lone surrogate cannot be UTF-8; as the \uXXXX escape it is still the same JSON string
        yield f"{separator}{json.dumps(name)}: {text}".encode("utf-8", "backslashreplace")
        separator = ", "
    yield b"}"


async def export(data: SubjectData, tenant: str, subject: str, request_id: str, requested_by: str) -> None:
    if await data.exports.get(request_id) is not None:
        return  # made already: a redelivered request
    size = await data.exports.put(request_id, tenant, subject, bundle_chunks(data, tenant, subject))
    await data.ledger.record(
        "exported",
        entry_id=f"export:{request_id}",
        tenant=tenant,
        subject=subject,
        requested_by=requested_by,
        size=size,
    )


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"{type(value).__name__} is not JSON")


class PrivacyStep:
    """Runs each request in log order; both are idempotent by request id, so redelivery repeats nothing."""

    def __init__(self, data: SubjectData, checkpoints: Checkpoints, metrics: Metrics | None = None) -> None:
        self._data = data
        self._checkpoints = checkpoints
        self._metrics = metrics

    async def __call__(self, events: Sequence[tuple[PrivacyEvent, Position]]) -> None:
        for event, _ in events:
            env = event.envelope
            assert env.subject is not None  # validated by the event
            if isinstance(event, SubjectErased):
                entry = await erase(self._data, env.tenant, env.subject, event.request_id, event.requested_by)
                log.info("erased %s/%s: %s", env.tenant, env.subject, entry.get("deleted"))
                if self._metrics is not None:
                    self._metrics.erasures.inc()
            else:
                await export(self._data, env.tenant, env.subject, event.request_id, event.requested_by)
        await advance_past(self._checkpoints, events)
