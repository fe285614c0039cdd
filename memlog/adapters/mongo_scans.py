"""The archive's reads of a conversation's entries in seq order, shaped so that SecantusDB reads them
from an index (issue 16).

SecantusDB's planner uses an index only when every field a filter names is in it (equality on its
prefix, at most one range after): a filter that also names `reset_at`, `compacted_at`, `exchange_id`,
or `entry_id` without the conversation is a scan of the whole collection, 30 to 45 s at 540,000
entries (a 30-minute soak's archive), long enough for the driver to give the server up and fail every
other operation in flight. So these filters name only the fields of `by_conversation` (tenant,
thread, owner, conversation, then a range of the group's `last` seq) or of the `_id` index, and every
other condition is checked here, in Python, on the entries that come back, as MongoDB would check it
(a missing field or one that is not a number never matches a numeric bound). On MongoDB the same
filters read the same index.

The groups of a conversation are disjoint ranges of seq (memlog/adapters/mongo_entries.py), so groups in
`last` order hold their entries in seq order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.collection import AsyncCollection

from memlog.adapters.mongo_entries import entry_docs

Doc = dict[str, Any]
Keep = Callable[[Doc], bool]
PAGE = 500  # groups per read when the caller wants every entry of a range


def equals(field: str, value: int) -> Keep:
    """MongoDB's `{field: value}` for an integer value."""
    return lambda doc: _integer(doc.get(field)) == value


def above(field: str, bound: int) -> Keep:
    """MongoDB's `{field: {"$gt": bound}}` for an integer bound."""

    def keep(doc: Doc) -> bool:
        found = _integer(doc.get(field))
        return found is not None and found > bound

    return keep


def at_most(field: str, bound: int) -> Keep:
    """MongoDB's `{field: {"$lte": bound}}` for an integer bound."""

    def keep(doc: Doc) -> bool:
        found = _integer(doc.get(field))
        return found is not None and found <= bound

    return keep


def every(_: Doc) -> bool:
    return True


def _integer(value: Any) -> int | float | None:
    """A number as MongoDB compares numbers (an int64 and a double alike); anything else matches no bound."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def within(seq: dict[str, int]) -> Callable[[int], bool]:
    """The range `seq` (`$gt`/`$gte`/`$lt`/`$lte`) as a test of one seq."""
    tests = {
        "$gt": lambda s, b: s > b,
        "$gte": lambda s, b: s >= b,
        "$lt": lambda s, b: s < b,
        "$lte": lambda s, b: s <= b,
    }
    return lambda s: all(tests[op](s, bound) for op, bound in seq.items())


async def in_seq_order(
    groups: AsyncCollection[Doc],
    where: Doc,
    seq: dict[str, int],
    keep: Keep,
    limit: int | None,
    *,
    descending: bool = False,
    fields: Doc | None = None,
) -> list[Doc]:
    """Up to `limit` (None: all) entries of one conversation (`where`) in `seq` order within the range
    `seq` that `keep` accepts, as documents: pages of groups along `by_conversation`."""
    inside = within(seq)
    found: list[Doc] = []
    size = PAGE if limit is None else max(1, min(limit, PAGE))
    low = {k: v for k, v in seq.items() if k in ("$gt", "$gte")}
    high = {k: v for k, v in seq.items() if k in ("$lt", "$lte")}
    if descending:
        # the groups below the top, newest first; the group holding the top itself may start under it
        top = high.get("$lt", high.get("$lte"))
        bound: Doc = {} if top is None else {"$lt": top} if "$lt" in high else {"$lte": top}
        pages: list[Doc] = []
        if top is not None:
            pages = (
                await groups.find({**where, "last": {"$gt" if "$lte" in high else "$gte": top}}, fields)
                .sort("last", ASCENDING)
                .limit(1)
                .to_list()
            )
    else:
        bound = dict(low)
        pages = []
    done = False
    while not done:
        query = {**where, **({"last": bound} if bound else {})}
        page = (
            await groups.find(query, fields).sort("last", DESCENDING if descending else ASCENDING).limit(size).to_list()
        )
        for group in [*pages, *page]:
            if _past(group, seq, descending):
                done = True
                break
            entries = entry_docs(group)
            for doc in reversed(entries) if descending else entries:
                if inside(int(doc["seq"])) and keep(doc):
                    found.append(doc)
        pages = []
        if done or len(page) < size or (limit is not None and len(found) >= limit):
            break
        last = int(page[-1]["last"])
        bound = (
            {k: v for k, v in bound.items() if k not in ("$lt", "$lte")} | {"$lt": last}
            if descending
            else {k: v for k, v in bound.items() if k not in ("$gt", "$gte")} | {"$gt": last}
        )
    return found if limit is None else found[:limit]


def _past(group: Doc, seq: dict[str, int], descending: bool) -> bool:
    """Whether the group, and every one after it in the read's order, lies beyond the range."""
    if descending:
        last = int(group["last"])
        return ("$gt" in seq and last <= seq["$gt"]) or ("$gte" in seq and last < seq["$gte"])
    first = int(group["first"])
    return ("$lt" in seq and first >= seq["$lt"]) or ("$lte" in seq and first > seq["$lte"])
