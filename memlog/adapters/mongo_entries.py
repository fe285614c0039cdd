"""Archived entries in MongoDB: a group document per run of one exchange, and the entries back.

`entry_groups` holds one document per group: the consecutive entries of one conversation that belong to
one exchange (a question, its tool calls, its answer), with one asker and one agent; a fold's summary is
a group of its own. A group is named by the store id (position) of its first entry, and grows where the
conversation's last group is the exchange's (`Tail`, kept on the conversation): so the groups are the
same however the log was cut into batches (live, redelivered or replayed), and within a conversation
they are disjoint ranges of seq, in seq order by `first` as by `last`. No group spans a thread
operation (fold, reset, rename, fork, purge): each one ends the conversation's tail.

Per group: the conversation's fields, `subject`, `agent`, `first` and `last` seq, and the arrays the
indexes read (`ids` the entry ids, `at` the times, `n` the places, `terms` the tokens of every entry);
`m` maps `s<seq>` to each entry's fields but its text and original, `t` maps `s<seq>` to the texts and
`o` to the originals (kept apart so a read can leave out megabytes of requests, or every text, with
one projection). A group archived before `vector_blocks` (memlog/adapters/mongo_vector_blocks.py)
may hold its runs' vectors in `v` until `prepare` moves them there; no read of entries carries them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from projections.archives import NEVER, ConversationRef, Entry
from schemas.events import KEY_SEPARATOR

GROUPS = "entry_groups"
LEGACY_ENTRIES = "entries"  # before issue 16 (item 2): one document per entry
WITHOUT_ORIGINALS = {"o": 0, "terms": 0, "v": 0}  # a group read for its entries' text and fields
WITHOUT_TERMS = {"terms": 0, "v": 0}
WITHOUT_TEXTS = {
    "o": 0,
    "t": 0,
    "terms": 0,
    "v": 0,
}  # a group read for its entries' fields alone: times, offsets, scope
# a group grows no further past this estimate of its size: MongoDB keeps a document within 16 MiB, and
# an entry alone (its text, original and tokens within the body limit) fits, as it did on its own
GROUP_BYTES = 8 * 1024 * 1024
GROUP_ENTRIES = 1000  # nor past this many entries: room for what folds add to each entry later (`archives`)
# nor past this many index terms (the sum of its entries'): SecantusDB rewrites every index key of a
# document at each update of it, so this bounds what one append costs (about 0.1 ms a key). An entry
# with more terms (up to ENTRY_TERMS) is a group of its own, written once and never grown.
GROUP_TERMS = 4000
ARRAYS = ("ids", "at", "n", "terms")  # a group's arrays, which an append sets to their union with the new


def conversation_id(ref: ConversationRef) -> str:
    # names cannot hold the unit separator, so this is unambiguous
    return f"{len(ref.tenant)}:{KEY_SEPARATOR.join((ref.tenant, ref.thread, ref.owner, ref.conversation))}"


def where(ref: ConversationRef) -> dict[str, Any]:
    return {"tenant": ref.tenant, "thread": ref.thread, "owner": ref.owner, "conversation": ref.conversation}


@dataclass(frozen=True)
class Tail:
    """A conversation's last group: the next entry joins it when it is of the same exchange and asker."""

    group: str
    exchange: str | None
    subject: str | None
    agent: str | None
    size: int = 0  # the estimate of the group's size
    entries: int = 0
    terms: int = 0  # the sum of its entries' counts of terms

    def takes(self, entry: Entry) -> bool:
        return (
            entry.exchange_id is not None
            and (self.exchange, self.subject, self.agent) == (entry.exchange_id, entry.subject, entry.agent)
            and self.size + size_of(entry) <= GROUP_BYTES
            and self.entries < GROUP_ENTRIES
            and self.terms + len(entry.terms) <= GROUP_TERMS
        )

    def doc(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "exchange": self.exchange,
            "subject": self.subject,
            "agent": self.agent,
            "size": self.size,
            "entries": self.entries,
            "terms": self.terms,
        }


def size_of(entry: Entry) -> int:
    """An upper bound of the bytes an entry adds to its group: four per character (UTF-8 at most) of
    each string it stores (its entry id twice: in its fields and in `ids`), its tokens, and 1 KiB for
    field names, numbers and its place in `at` and `n`."""
    strings = (
        len(entry.text)
        + len(entry.original or "")
        + 2 * len(entry.entry_id)
        + len(entry.exchange_id or "")
        + len(entry.store_id)
        + len(entry.forked_from or "")
        + sum(len(t) for t in entry.terms)
    )
    return 4 * strings + 16 * len(entry.terms) + 1024


def tail_of(doc: Mapping[str, Any] | None) -> Tail | None:
    held = doc.get("tail") if doc else None
    if not isinstance(held, Mapping) or not isinstance(held.get("group"), str):
        return None
    size, count, terms = held.get("size"), held.get("entries"), held.get("terms")
    return Tail(
        held["group"],
        held.get("exchange"),
        held.get("subject"),
        held.get("agent"),
        _count(size, GROUP_BYTES),
        _count(count, GROUP_ENTRIES),
        _count(terms, GROUP_TERMS),  # a tail from before the bound: the next entry starts afresh
    )


def _count(value: Any, otherwise: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else otherwise


@dataclass(frozen=True)
class Run:
    """Entries of one group written by one batch; `grows`: the group may exist already (the tail's)."""

    group: str
    grows: bool
    entries: tuple[Entry, ...]


def runs(
    entries: Iterable[Entry], tails: Mapping[ConversationRef, Tail]
) -> tuple[list[Run], dict[ConversationRef, Tail]]:
    """The entries (log order, none stored yet) in their groups, and each conversation's tail after them."""
    tail = dict(tails)
    grouped: dict[str, list[Entry]] = {}
    grows: set[str] = set()
    for entry in entries:
        held = tail.get(entry.ref)
        if held is not None and held.takes(entry):
            group, size, count = held.group, held.size + size_of(entry), held.entries + 1
            terms = held.terms + len(entry.terms)
            if group not in grouped:
                grows.add(group)
        else:
            group, size, count, terms = entry.store_id, size_of(entry), 1, len(entry.terms)
        grouped.setdefault(group, []).append(entry)
        tail[entry.ref] = Tail(group, entry.exchange_id, entry.subject, entry.agent, size, count, terms)
    return [Run(group, group in grows, tuple(found)) for group, found in grouped.items()], tail


def _key(seq: int) -> str:
    return f"s{seq}"


def _unique(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))  # in first-seen order


def _message(entry: Entry) -> dict[str, Any]:
    return {
        "id": entry.store_id,
        "entry_id": entry.entry_id,
        "seq": entry.seq,
        "exchange_id": entry.exchange_id,
        "role": entry.role,
        "occurred_at": entry.occurred_at,
        "enters_prompt": entry.enters_prompt,
        "compacted_at": entry.compacted_at,
        "reset_at": entry.reset_at,
        "archives": list(entry.archives),
        "forked_from": entry.forked_from,
        **({} if entry.n is None else {"n": entry.n}),
        **({"terms_cut": entry.terms_cut} if entry.terms_cut else {}),
    }


def once(entries: Sequence[Entry]) -> list[Entry]:
    """The entries without a repeated entry id (the first kept, as the entry identity index keeps it)."""
    seen: set[str] = set()
    kept = []
    for entry in entries:
        if entry.entry_id not in seen:
            seen.add(entry.entry_id)
            kept.append(entry)
    return kept


def _arrays(entries: Sequence[Entry]) -> dict[str, list[Any]]:
    return {
        "ids": _unique(e.entry_id for e in entries),
        "at": _unique(e.occurred_at for e in entries),
        "n": _unique(e.n for e in entries if e.n is not None),
        "terms": _unique(term for e in entries for term in e.terms),
    }


def _owners(entry: Entry) -> dict[str, Any]:
    return {**where(entry.ref), "subject": entry.subject, "agent": entry.agent}


def group_doc(group: str, entries: Sequence[Entry]) -> dict[str, Any]:
    """A new group's document."""
    kept = once(entries)
    originals = {_key(e.seq): e.original for e in kept if e.original is not None}
    return {
        "_id": group,
        **_owners(kept[0]),
        "first": min(e.seq for e in kept),
        "last": max(e.seq for e in kept),
        **_arrays(kept),
        "m": {_key(e.seq): _message(e) for e in kept},
        "t": {_key(e.seq): e.text for e in kept},
        **({"o": originals} if originals else {}),
    }


def group_update(entries: Sequence[Entry], held: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The update adding entries to a group (creating it when missing): idempotent, each entry by its seq.

    `held`: the group's arrays as read (none when it is missing). Each array is set to its union with
    the entries', computed here: `$addToSet` with `$each` costs SecantusDB a membership test of each new
    value against every value held and added (measured 45 s for 2,000 new terms), where the union costs
    this process a set lookup per value."""
    kept = once(entries)
    assigned: dict[str, Any] = {f"m.{_key(e.seq)}": _message(e) for e in kept}
    assigned |= {f"t.{_key(e.seq)}": e.text for e in kept}
    assigned |= {f"o.{_key(e.seq)}": e.original for e in kept if e.original is not None}
    for name, values in _arrays(kept).items():
        before = list((held or {}).get(name) or ())
        assigned[name] = _unique([*before, *values])
    return {
        "$set": assigned,
        "$min": {"first": min(e.seq for e in kept)},
        "$max": {"last": max(e.seq for e in kept)},
        "$setOnInsert": _owners(kept[0]),
    }


def entry_docs(group: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A group's entries in seq order, each as the document `entry_of_doc` reads (and the scans check):
    the group's fields, the entry's own, `_id` its store id, its `text` ("" when the group was read
    without its texts) and `original` when the group was read with them."""
    base = {name: group.get(name) for name in ("tenant", "thread", "owner", "conversation", "subject", "agent")}
    originals = group.get("o") or {}
    texts = group.get("t") or {}
    found = []
    for key, message in (group.get("m") or {}).items():
        doc = {**base, **message, "_id": message.get("id"), "group": group.get("_id"), "text": texts.get(key, "")}
        if key in originals:
            doc["original"] = originals[key]
        found.append(doc)
    return sorted(found, key=lambda doc: int(doc["seq"]))


def entries_of(groups: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [doc for group in groups for doc in entry_docs(group)]


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
        terms_cut=int(doc.get("terms_cut") or 0),
    )
