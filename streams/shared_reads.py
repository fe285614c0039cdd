"""Records read once per process: the projections of one topic in one worker share what a record reads as.

Three projections read the threads topic (sessions, archive, facts-activity), each through an agent of
its own. Without this, each decodes, opens and validates every record again. With it, the first to read
a record keeps the result here for the others that have not passed it yet, until each of them has taken
it (or it is pushed out by newer records past `max_bytes`).

A shared result is exactly what reading the record again would give: it is kept with the record's bytes
(another record at the same place is read afresh) and with the key id it was opened with, and it is
handed out only while that key still opens records in this process (`Sealer.refresh`, the check a fresh
read makes). A subject erased meanwhile, here or elsewhere, has its records read afresh, as `Erased`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streams.sealer import Sealer

if TYPE_CHECKING:
    from streams.projector import Read, Record

MAX_BYTES = 16 << 20  # of record values held at once; what a lagging reader misses it reads itself


@dataclass
class _Kept:
    value: bytes | None
    read: Read
    key_id: str | None  # the data key the record was opened with; None: not sealed, or not opened
    waiting: set[str]  # the readers still to take it


class SharedReads:
    """What the records of one topic read as, kept for the other projections (`readers`, by name) of this
    process that have not passed them yet."""

    def __init__(self, readers: Sequence[str], max_bytes: int = MAX_BYTES, *, first: Sequence[str] = ()) -> None:
        """`first`: readers that never wait for another's read in progress (`reading`): they read for
        themselves meanwhile (the sessions, which the next turn reads)."""
        self.readers = tuple(readers)
        self.first = frozenset(first)
        self._max_bytes = max_bytes
        self._kept: dict[tuple[int, int], _Kept] = {}  # (partition, offset), oldest first
        self._bytes = 0
        self._passed: dict[str, dict[int, int]] = {reader: {} for reader in self.readers}  # newest offsets
        # held from `take` to the last `keep` of a read: the agents get the same records at about the same
        # time, and one that waits on the key vault would otherwise let the others read them all again
        self.reading = asyncio.Lock()
        self.hits = 0  # records handed out here rather than read again

    def __len__(self) -> int:
        return len(self._kept)

    async def take(self, reader: str, records: Sequence[Record], sealer: Sealer | None) -> list[Read | None]:
        """What each record reads as, when another projection read it; None where `reader` must read it."""
        found: list[_Kept | None] = []
        passed = self._passed.setdefault(reader, {})
        for record in records:
            kept = self._kept.get((record.partition, record.offset))
            found.append(kept if kept is not None and kept.value == record.value else None)
            passed[record.partition] = max(passed.get(record.partition, -1), record.offset)
        keys = {kept.key_id for kept in found if kept is not None and kept.key_id is not None}
        alive = set() if not keys or sealer is None else await sealer.refresh(keys)
        out: list[Read | None] = []
        for record, kept in zip(records, found, strict=True):
            if kept is None or (kept.key_id is not None and kept.key_id not in alive):
                out.append(None)
                continue
            self.hits += 1
            kept.waiting.discard(reader)
            if not kept.waiting:
                self._drop((record.partition, record.offset))
            out.append(kept.read)
        return out

    def keep(self, reader: str, record: Record, read: Read, key_id: str | None) -> None:
        """Keep what `record` read as for the readers that have not passed it (`key_id`: the key it was
        opened with)."""
        place = (record.partition, record.offset)
        self._drop(place)
        waiting = {
            other
            for other, passed in self._passed.items()
            if other != reader and passed.get(record.partition, -1) < record.offset
        }
        if not waiting:
            return
        self._kept[place] = _Kept(record.value, read, key_id, waiting)
        self._bytes += len(record.value or b"")
        while self._bytes > self._max_bytes and self._kept:
            self._drop(next(iter(self._kept)))

    def _drop(self, place: tuple[int, int]) -> None:
        kept = self._kept.pop(place, None)
        if kept is not None:
            self._bytes -= len(kept.value or b"")
