"""A replay's threads kept in memory across its batches (issue 16): pure, no I/O.

A replay writes into a fresh namespace, so a thread it first finds absent holds, from then on, only
what the replay itself writes. Instead of loading such a thread from the store for every batch (a
round trip, and every exchange's JSON decoded again), the replay keeps its head and all its exchanges
as its own writes leave them, and the store's version of the thread (`ReadyThread.version`: the
position applied and the count of changes made outside the log's order, such as an erasure of lines).

Before each batch the step reads the versions of the threads it keeps (one light round trip): a thread
whose version is not the one its writes left (erased meanwhile, expired by the clock, or written by
someone else) is forgotten and loaded like any other, so the rules always see what the store holds.
A thread found present when first loaded is never kept: the memory would not know all its exchanges.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping

from projections.ready import thread_version
from projections.session import Exchange, Loaded, SessionChange, SessionHead, SessionWrite, ThreadKey

# Past this many exchanges held, the memory lets everything go: the threads are then loaded per
# batch like a live worker's, slower but in bounded memory.
HELD_EXCHANGES = 1_000_000


class _Held:
    __slots__ = ("exchanges", "head", "version")

    def __init__(self) -> None:
        self.head: SessionHead | None = None
        self.exchanges: dict[str, Exchange] = {}
        self.version: str | None = None  # the store's version of the thread; None: the store holds none


class ThreadMemory:
    def __init__(self, limit: int = HELD_EXCHANGES) -> None:
        self._threads: dict[ThreadKey, _Held] = {}
        self._limit = limit
        self._held = 0

    def __len__(self) -> int:
        return len(self._threads)

    def __contains__(self, key: object) -> bool:
        return key in self._threads

    @property
    def threads(self) -> Container[ThreadKey]:
        """The threads kept (a view: looking one up costs no Python call)."""
        return self._threads.keys()

    def check(self, versions: Mapping[ThreadKey, str | None]) -> None:
        """Given the store's versions of threads: forget every kept thread whose version is not the one the
        replay's writes left, and keep every other thread the store holds none of."""
        for key, version in versions.items():
            held = self._threads.get(key)
            if held is None:
                if version is None:
                    self._threads[key] = _Held()  # from now on it holds what the replay writes
            elif held.version != version:
                self.forget((key,))

    def version(self, key: ThreadKey) -> str | None:
        """The version of a kept thread its writes left in the store (None: not kept, or nothing written yet)."""
        held = self._threads.get(key)
        return None if held is None else held.version

    def recall(self, wanted: Iterable[tuple[ThreadKey, str]]) -> tuple[Loaded, list[tuple[ThreadKey, str]]]:
        """What the memory knows of `wanted` (an exchange it does not hold is not in the store), and the
        rest, to load."""
        known: dict[tuple[ThreadKey, str], tuple[SessionHead | None, Exchange | None]] = {}
        missing: list[tuple[ThreadKey, str]] = []
        for key, exchange_id in wanted:
            held = self._threads.get(key)
            if held is None:
                missing.append((key, exchange_id))
            else:
                known[(key, exchange_id)] = (held.head, held.exchanges.get(exchange_id))
        return known, missing

    def remember(
        self, writes: Iterable[SessionWrite], heads: Mapping[ThreadKey, SessionHead | None], now_ms: int
    ) -> None:
        """The kept threads as the store holds them once `writes` are written (at `now_ms`), and `heads` as
        the batch's plan left them: the same effects, change by change, as the stores apply."""
        touched: set[ThreadKey] = set()
        for write in writes:
            change = write.change
            if write.key is None or change is None or change.expires_at <= now_ms:
                continue  # only records the position, or expired: the store writes nothing of the thread
            held = self._threads.get(write.key)
            if held is None:
                continue
            touched.add(write.key)
            if change.reset:
                self._held -= len(held.exchanges)
                held.exchanges.clear()  # the store drops the thread's keys, the count of edits with them
            for exchange_id in change.remove:
                self._held -= held.exchanges.pop(exchange_id, None) is not None
            if change.exchange is not None:
                self._held += change.exchange.exchange_id not in held.exchanges
                held.exchanges[change.exchange.exchange_id] = change.exchange
            held.version = thread_version(write.position.offset, 0)
        for key in touched:
            self._threads[key].head = heads[key]
        if self._held > self._limit:
            self.clear()

    def forget(self, keys: Iterable[ThreadKey]) -> None:
        for key in keys:
            held = self._threads.pop(key, None)
            if held is not None:
                self._held -= len(held.exchanges)

    def clear(self) -> None:
        self._threads.clear()
        self._held = 0


def coalesce(writes: list[SessionWrite], threads: Container[ThreadKey], now_ms: int) -> list[SessionWrite]:
    """`writes` with each run of changes to one exchange, one after another in a thread of `threads`, made
    one change: the last one's exchange, position and times, the run's token and count deltas summed (a
    reset only as the run's first). The others only record their positions.

    The store writes the one change as it would have written the run, provided it writes every change of
    the run: so only for threads it holds nothing of past the batch's first position (those a replay's
    memory kept or found absent), and with no change of the run expired by `now_ms`. A thread's question,
    tool calls and answer mostly land in one batch: one change instead of three, for the store to apply.
    """
    out = list(writes)
    runs: dict[ThreadKey, int] = {}  # thread -> where its open run's change stands in `out`
    for index, write in enumerate(writes):
        key, change = write.key, write.change
        if key is None or change is None or key not in threads:
            continue
        exchange = change.exchange
        joins = (
            exchange is not None
            and change.expires_at > now_ms
            and not change.remove
            and change.summary is None
            and change.segment is None
        )
        if not joins:
            runs.pop(key, None)
            continue
        assert exchange is not None
        at = runs.get(key)
        before = out[at].change if at is not None else None
        if (
            at is None
            or before is None
            or change.reset
            or before.exchange is None
            or before.exchange.exchange_id != exchange.exchange_id
        ):
            runs[key] = index
            continue
        out[at] = SessionWrite(out[at].position)
        out[index] = SessionWrite(
            write.position,
            key,
            SessionChange(
                exchange=exchange,
                reset=before.reset,
                token_delta=before.token_delta + change.token_delta,
                last_question_at=change.last_question_at,
                expires_at=change.expires_at,
                count_delta=before.count_delta + change.count_delta,
            ),
        )
        runs[key] = index
    return out
