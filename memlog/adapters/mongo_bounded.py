"""A search's reads of entry groups in short commands (issue 41: bounded search, a query stopped within
1 s of its client leaving).

SecantusDB holds a find's whole result before its first batch (a `batchSize` slices only the reply), it
reads every match even under a `limit`, and it finishes a running command before it sees its client
close. So the way to keep a search's commands short is to give each one few groups to read: a command
of a search reads at most `SLICE` groups by `_id`, or the groups of terms whose postings say they are
few (`SLICE` together, however many terms), never every group of a common word. Between two
commands the request's task can be cancelled (memlog/api/gone.py), and the driver closes the
connection of a command in flight: the server lets it go once that one command ends.

A term's postings (memlog/adapters/mongo_postings.py) are read first, best first: a term held by more
than `per_term` exchanges contributes only the groups of its best `per_term` (the result is partial);
a term of at most `SLICE` exchanges finds its groups through the groups' term index, as before, so a
term an entry did not post (an entry's 1,001st most frequent word, or an archive written before
postings) is still found; a term in between reads the groups its postings name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection

from memlog.adapters.mongo_entries import WITHOUT_ORIGINALS, entries_of, entry_of_doc
from memlog.adapters.mongo_postings import MongoPostings
from memlog.adapters.mongo_siblings import with_siblings
from memlog.adapters.mongo_store import mongo_errors
from projections.archives import Entry
from projections.postings import Within

SLICE = 16  # groups a command reads by `_id` at most: about 0.1 to 0.3 s of 22 KB exchanges on SecantusDB

Doc = dict[str, Any]


def chunks(tops: Mapping[str, list[str]], budget: int) -> list[list[str]]:
    """The rare terms in runs whose postings name at most `budget` groups together (a term joins the
    first run it fits, so terms that share their groups share a run; a term with no posting counts one
    group: an entry that did not post it may hold it), one run a command."""
    runs: list[tuple[list[str], set[str]]] = []
    for term, groups in tops.items():
        named = set(groups) or {f"?{term}"}
        run = next((r for r in runs if len(r[1] | named) <= budget), None)
        if run is None:
            runs.append(([term], named))
        else:
            run[0].append(term)
            run[1].update(named)
    return [terms for terms, _ in runs]


async def by_id(groups: AsyncCollection[Doc], ids: list[str], projection: Mapping[str, int], time_ms: int) -> list[Doc]:
    """The groups of `ids`, `SLICE` a command."""
    found: list[Doc] = []
    for start in range(0, len(ids), SLICE):
        query = {"_id": {"$in": ids[start : start + SLICE]}}
        found += await groups.find(query, projection).max_time_ms(time_ms).to_list()
    return found


async def bounded_groups(
    groups: AsyncCollection[Doc],
    tops: Mapping[str, list[str]],
    rare_query: Callable[[list[str]], Doc],
    keep: Callable[[Doc], bool],
    *,
    per_term: int,
    projection: Mapping[str, int],
    time_ms: int,
    limit: int | None = None,
    indexed: bool = True,
) -> tuple[list[Doc], bool]:
    """The groups of the terms of `tops` (each term's best `per_term + 1` groups by its postings): a
    rare term's through `rare_query` (a few terms a command), a common term's best `per_term` by `_id`;
    at most `limit` groups through `rare_query`. Groups `keep` refuses are dropped (a group read by `_id` is
    checked there, not in the query: naming more fields makes SecantusDB's planner read more). And
    whether a term was cut. Not `indexed` (`rare_query` scans the collection): only terms no posting
    names go through it, the others' groups are read by their postings."""
    common = {t: g[:per_term] for t, g in tops.items() if len(g) > per_term}
    # a term of more than a slice's exchanges: its postings' groups by `_id` (an entry's unposted term
    # is missed there); of fewer: through the term index, a few terms a command
    least = SLICE if indexed else 0
    by_postings = {t: g for t, g in tops.items() if t not in common and len(g) > least}
    rare = {t: g for t, g in tops.items() if t not in common and len(g) <= least}
    found: dict[str, Doc] = {}
    for run in chunks(rare, SLICE):
        if limit is not None and len(found) >= limit:
            break
        read = groups.find(rare_query(run), projection).max_time_ms(time_ms)
        if limit is not None:
            read = read.limit(limit - len(found))
        for doc in await read.to_list():
            if keep(doc):  # `rare_query` names no conversation: a term beside one makes SecantusDB scan
                found.setdefault(doc["_id"], doc)
    chosen = sorted({g for best in [*common.values(), *by_postings.values()] for g in best} - set(found))
    for doc in await by_id(groups, chosen, projection, time_ms):
        if keep(doc):
            found.setdefault(doc["_id"], doc)
    return list(found.values()), bool(common)


class ThreadBoundedReads:
    """MongoConversationArchive's search candidates: the filter, and the bounded read."""

    _entries: AsyncCollection[Doc]
    _postings: MongoPostings
    _search_time_ms: int

    def candidate_query(
        self, tenant: str, thread: str, owner: str, terms: list[str], *, conversation: str | None
    ) -> dict[str, Any]:
        """The MongoDB filter search issues (the benchmark times it raw).

        Equality on the thread and the terms only: SecantusDB's planner falls back to a collection scan
        when a range joins them, or a field neither index holds (a conversation beside the terms), so
        the conversation, scope, snapshot and dates are checked on what comes back by the callers.
        """
        query: dict[str, Any] = {"tenant": tenant, "thread": thread, "owner": owner}
        if terms:
            query["terms"] = {"$in": terms}
        elif conversation is not None:
            query["conversation"] = conversation
        return query

    async def bounded_candidates(
        self, tenant: str, thread: str, owner: str, terms: list[str], *, within: Within, per_term: int, limit: int
    ) -> tuple[list[Entry], bool]:
        """ConversationArchive: a common term's groups cut by its postings (`bounded_groups`)."""
        conversation, time_ms = within[0], self._search_time_ms
        place = {"tenant": tenant, "thread": thread, "owner": owner}
        if conversation is not None:
            place["conversation"] = conversation
        with mongo_errors():
            tops = {
                t: await self._postings.top_in_thread(tenant, thread, owner, t, per_term + 1, time_ms, within=within)
                for t in terms
            }
            groups, cut = await bounded_groups(
                self._entries,
                tops,
                lambda run: self.candidate_query(tenant, thread, owner, run, conversation=conversation),
                lambda doc: all(doc.get(k) == v for k, v in place.items()),
                per_term=per_term,
                projection=WITHOUT_ORIGINALS,  # a search shows no original (it can be megabytes)
                time_ms=time_ms,
                limit=limit,
            )
            entries = list(map(entry_of_doc, entries_of(groups)))
            return await with_siblings(self._entries, entries, WITHOUT_ORIGINALS, time_ms), cut
