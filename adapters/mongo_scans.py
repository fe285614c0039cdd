"""The archive's reads and updates of a conversation's entries, shaped so that SecantusDB reads them
from an index (issue 16).

SecantusDB's planner uses an index only when every field a filter names is in it (equality on its
prefix, at most one range after): a filter that also names `reset_at`, `compacted_at`, `exchange_id`,
or `entry_id` without the conversation is a scan of the whole collection, 30 to 45 s at 540,000
entries (a 30-minute soak's archive), long enough for the driver to give the server up and fail every
other operation in flight. So these filters name only the fields of `by_conversation` (tenant,
thread, owner, conversation, then a `seq` range) or of the `_id` index, and every other condition is
checked here, in Python, on what comes back, as MongoDB would check it (a missing field or one that is
not a number never matches a numeric bound). On MongoDB the same filters read the same index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.collection import AsyncCollection

Doc = dict[str, Any]
Keep = Callable[[Doc], bool]
ID_CHUNK = 1000  # ids per `$in` of an update


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


def _integer(value: Any) -> int | float | None:
    """A number as MongoDB compares numbers (an int64 and a double alike); anything else matches no bound."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


async def in_seq_order(
    entries: AsyncCollection[Doc],
    where: Doc,
    seq: dict[str, int],
    keep: Keep,
    limit: int,
    *,
    descending: bool = False,
    fields: Doc | None = None,
) -> list[Doc]:
    """Up to `limit` documents of one conversation (`where`) in `seq` order within the range `seq`
    (`$gt`/`$gte`/`$lt`/`$lte`) that `keep` accepts: pages of `by_conversation`, each continuing after
    the last seq of the one before (a conversation's seqs are unique: its events' offsets)."""
    found: list[Doc] = []
    bound = dict(seq)
    while len(found) < limit:
        page = (
            await entries.find({**where, "seq": bound}, fields)
            .sort("seq", DESCENDING if descending else ASCENDING)
            .limit(limit)
            .to_list()
        )
        found += [doc for doc in page if keep(doc)]
        if len(page) < limit:
            break
        last = int(page[-1]["seq"])
        if descending:
            bound = {k: v for k, v in bound.items() if k not in ("$lt", "$lte")} | {"$lt": last}
        else:
            bound = {k: v for k, v in bound.items() if k not in ("$gt", "$gte")} | {"$gt": last}
    return found[:limit]


async def ids_where(entries: AsyncCollection[Doc], where: Doc, checked: Sequence[str], keep: Keep) -> list[Any]:
    """The `_id`s of the documents of `where` (fields of one index) that `keep` accepts, reading only
    the `checked` fields."""
    projection = {"_id": 1, **dict.fromkeys(checked, 1)}
    return [doc["_id"] for doc in await entries.find(where, projection).to_list() if keep(doc)]


async def docs_where(entries: AsyncCollection[Doc], where: Doc, checked: Sequence[str], keep: Keep) -> list[Doc]:
    """The whole documents (without their terms) of `where` that `keep` accepts: their ids first, read
    with the `checked` fields only, then the documents by `_id`."""
    ids = await ids_where(entries, where, checked, keep)
    found: list[Doc] = []
    for start in range(0, len(ids), ID_CHUNK):
        found += await entries.find({"_id": {"$in": ids[start : start + ID_CHUNK]}}, {"terms": 0}).to_list()
    return found


async def update_ids(entries: AsyncCollection[Doc], ids: Sequence[Any], update: Doc) -> None:
    for start in range(0, len(ids), ID_CHUNK):
        await entries.update_many({"_id": {"$in": list(ids[start : start + ID_CHUNK])}}, update)
