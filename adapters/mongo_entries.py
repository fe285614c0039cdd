"""An archived entry as a MongoDB document of `entries`, and back."""

from __future__ import annotations

from typing import Any

from projections.archives import NEVER, ConversationRef, Entry
from schemas.events import KEY_SEPARATOR


def conversation_id(ref: ConversationRef) -> str:
    # names cannot hold the unit separator, so this is unambiguous
    return f"{len(ref.tenant)}:{KEY_SEPARATOR.join((ref.tenant, ref.thread, ref.owner, ref.conversation))}"


def where(ref: ConversationRef) -> dict[str, Any]:
    return {"tenant": ref.tenant, "thread": ref.thread, "owner": ref.owner, "conversation": ref.conversation}


def entry_doc(entry: Entry) -> dict[str, Any]:
    return {
        "_id": entry.store_id,
        **where(entry.ref),
        "entry_id": entry.entry_id,
        "seq": entry.seq,
        "exchange_id": entry.exchange_id,
        "role": entry.role,
        "occurred_at": entry.occurred_at,
        "text": entry.text,
        "original": entry.original,
        "subject": entry.subject,
        "agent": entry.agent,
        "enters_prompt": entry.enters_prompt,
        "compacted_at": entry.compacted_at,
        "reset_at": entry.reset_at,
        "archives": list(entry.archives),
        "forked_from": entry.forked_from,
        "terms": list(entry.terms),
        **({} if entry.n is None else {"n": entry.n}),
    }


def entry_of_doc(doc: dict[str, Any]) -> Entry:
    return Entry(
        ref=ConversationRef(doc["tenant"], doc["thread"], doc["owner"], doc["conversation"]),
        entry_id=doc["entry_id"],
        store_id=doc["_id"],
        seq=int(doc["seq"]),
        exchange_id=doc.get("exchange_id"),
        role=doc["role"],
        occurred_at=int(doc["occurred_at"]),
        text=doc.get("text", ""),
        original=doc.get("original"),
        subject=doc.get("subject"),
        agent=doc.get("agent"),
        enters_prompt=bool(doc.get("enters_prompt", True)),
        compacted_at=int(doc.get("compacted_at", NEVER)),
        reset_at=int(doc.get("reset_at", NEVER)),
        archives=tuple(doc.get("archives", ())),
        forked_from=doc.get("forked_from"),
        terms=tuple(doc.get("terms", ())),
        n=None if doc.get("n") is None else int(doc["n"]),
    )
