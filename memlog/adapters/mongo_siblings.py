"""Whole exchanges from the entry groups a term found.

An exchange's entries share one group (memlog/adapters/mongo_entries.py) unless one of them is too large to share
(`GROUP_TERMS`): that entry is a group of its own, and a term of it finds that group alone. Search ranks
an exchange as one document, so the question and answer of such an exchange are read too: one read,
only for the exchanges found without them, one per conversation.
"""

from __future__ import annotations

from typing import Any

from pymongo.asynchronous.collection import AsyncCollection

from memlog.adapters.mongo_entries import entries_of, entry_of_doc, where
from projections.archives import ConversationRef, Entry


async def with_siblings(
    groups: AsyncCollection[dict[str, Any]], entries: list[Entry], projection: dict[str, int], time_ms: int
) -> list[Entry]:
    """`entries` with the question and answer of each of their exchanges that sit in another group, in
    the order of the log (as the groups hold them). The caller catches the store's errors."""
    held = {(e.ref, e.entry_id) for e in entries}
    wanted: dict[ConversationRef, set[str]] = {}
    for entry in entries:
        if entry.exchange_id is None:
            continue
        for role in ("q", "a"):
            entry_id = f"{entry.exchange_id}.{role}"
            if (entry.ref, entry_id) not in held:
                wanted.setdefault(entry.ref, set()).add(entry_id)
    if not wanted:
        return entries
    found: list[dict[str, Any]] = []
    for ref, ids in wanted.items():  # one read a conversation, on its identity index (an $or scans on SecantusDB)
        query = {**where(ref), "ids": {"$in": sorted(ids)}}
        found += await groups.find(query, projection).max_time_ms(time_ms).to_list()
    more = [e for e in map(entry_of_doc, entries_of(found)) if (e.ref, e.entry_id) not in held]
    return sorted([*entries, *more], key=lambda e: (e.ref, e.seq)) if more else entries
