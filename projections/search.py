"""Search across threads (seed 004, "Search and recall"): pure rules, no I/O.

An agent's explicit search covers the entries it took part in (every entry carries the agent of its
event: its exchanges in subjects' sessions, its automation thread, its answers in the public thread);
an operator's covers every thread of the tenant. Both rank as per-thread search does (exact phrase,
then BM25 score over whole exchanges, then newer, then identity) and mark every result `enters_prompt: false`.

One snapshot across threads. A thread's `seq` is an offset of the partition the thread lives on, so
offsets of two threads do not compare, and a single number cannot say what a paging run saw. The
snapshot is a mark per partition instead: the highest offset applied there when the first page was
read (the archive projection's checkpoint, raised to what the candidates show applied: an entry's
own offset, its fork's, the fold or reset that archived it). The archive applies a partition in
offset order, so everything applied after the first page sits above
its partition's mark: entries appended, forked or archived later stay out of the run, and provenance
(active, compacted, reset) is what it was on the first page. A partition no candidate came from has
no mark: a later entry there is later than the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from projections.archives import NEVER, SCORE_SCALE, Entry, Match, Scope, in_scope
from projections.cursors import Cursors, entries, items, text, whole

FORKED = ">fork@"  # a fork copy's store id: the source's, then the fork's offset (projections.archives.forked)
Marks = dict[str, int]
Key = tuple[int, int, int, str]


def partition_of(entry: Entry) -> str:
    """`topic:partition` of the position an entry came from (its store id is `topic:partition:offset`)."""
    return entry.store_id.split(FORKED, 1)[0].rpartition(":")[0]


def topic_partition(part: str) -> tuple[str, int] | None:
    """`topic:partition` as a checkpoint names it; None for a store id of another form (a bulk load's)."""
    topic, _, partition = part.rpartition(":")
    return (topic, int(partition)) if topic and partition.isdigit() else None


def landed(entry: Entry) -> int:
    """The offset at which this entry came into its conversation: its own, or its (last) fork's."""
    _, forked, at = entry.store_id.rpartition(FORKED)
    return int(at) if forked and at.isdigit() else entry.seq


def marks_of(entries: Iterable[Entry]) -> Marks:
    """Per partition, the highest offset the entries show to have been applied."""
    marks: Marks = {}
    for entry in entries:
        seen = [landed(entry), *(at for at in (entry.compacted_at, entry.reset_at) if at != NEVER)]
        part = partition_of(entry)
        marks[part] = max(marks.get(part, -1), *seen)
    return marks


def visible(
    entry: Entry, marks: Mapping[str, int], scope: Scope, since: int | None = None, until: int | None = None
) -> bool:
    """In the run's snapshot and scope (current: since the latest reset of its conversation; history: all)."""
    mark = marks.get(partition_of(entry))
    if mark is None or landed(entry) > mark:
        return False
    if scope != "history" and entry.reset_at <= mark:
        return False
    return (since is None or entry.occurred_at >= since) and (until is None or entry.occurred_at < until)


def provenance(entry: Entry, marks: Mapping[str, int]) -> str:
    return entry.provenance(marks.get(partition_of(entry), NEVER - 1))


def across_key(found: Match, entry: Entry) -> Key:
    """Per-thread ranking with "newer" read from the time it occurred: offsets of two partitions do not compare."""
    return (0 if found.phrase else 1, -round(found.score * SCORE_SCALE), -entry.occurred_at, entry.store_id)


def encode_cursor(
    cursors: Cursors, bound: str, marks: Mapping[str, int], key: Key, documents: int | None = None
) -> str:
    """`documents`: the run's count of exchanges (BM25's N), so every page scores as the first did."""
    return cursors.seal(bound, {"m": dict(marks), "p": list(key), "n": documents})


def decode_cursor(cursors: Cursors, cursor: str, bound: str) -> tuple[Marks, Key, int | None]:
    """(marks, position, documents) of a cursor sealed for the same binding; InvalidEvent('cursor') otherwise."""
    raw = entries(cursors.open(cursor, bound))
    position = items(raw.get("p"), 4)
    marks = {part: whole(at) for part, at in entries(raw.get("m")).items()}
    documents = raw.get("n")
    key: Key = (whole(position[0]), whole(position[1]), whole(position[2]), text(position[3]))
    return marks, key, None if documents is None else whole(documents)


def in_window(found: list[Entry], scope: Scope, snapshot: int, since: int | None, until: int | None) -> list[Entry]:
    """A search's candidates in scope at the snapshot, occurred in [since, until) when given."""
    return [
        e
        for e in found
        if in_scope(e, scope, snapshot)
        and (since is None or e.occurred_at >= since)
        and (until is None or e.occurred_at < until)
    ]
