"""Benchmark: what the archive projection writes to MongoDB per exchange (a question, tool calls, an
answer), counted from the driver's own command events, with and without the raw `archive` copy of
every thread event that memlog kept until issue 17 (item 7), beside the raw floor. No assertions.

Every row runs in the same process on the local stack, each into a fresh namespace:
- "with the raw copy": besides the step, the documents the removed `MongoArchiveStore` wrote (one per
  event, `_id` = position, its two indexes), one exchange per batch as quiet live traffic arrives;
- the step alone, one exchange per batch, and with the exchanges of a loaded worker's batch together
  (`MEMLOG_BENCH_ARCHIVE_BATCH`, default 50 exchanges: the worker applies up to 500 records a batch);
- the floor: raw `insert_many` of the very entry documents the batched step wrote (captured from its
  insert commands), in the same batches, into a collection with the same indexes. Its exchanges/s is
  what the MongoDB-protocol server allows for one document per message, whatever memlog does around it;
- the same entries merged into one document per exchange, inserted raw the same way: a layout memlog
  does not have (search, places and forks work per message), measured for what it would allow.

`MEMLOG_BENCH_ARCHIVE_EXCHANGES` sets how many exchanges (default 300), `MEMLOG_BENCH_ARCHIVE_TOOL_CALLS`
how many tool calls each has (default 1, as issue 16 counts).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.monitoring import CommandFailedEvent, CommandListener, CommandStartedEvent, CommandSucceededEvent

from adapters import connections
from adapters.mongo_store import mongo_client
from adapters.wiring import Stores, open_stores
from bench.projection import on_local_stack
from config.settings import Settings
from memlog.processes import isolated
from projections.position import Position
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent, ToolCalled, to_record
from streams.steps.archive import ArchiveStep

EXCHANGES = int(os.environ.get("MEMLOG_BENCH_ARCHIVE_EXCHANGES", "300"))
TOOL_CALLS = int(os.environ.get("MEMLOG_BENCH_ARCHIVE_TOOL_CALLS", "1"))
LOADED_BATCH = int(os.environ.get("MEMLOG_BENCH_ARCHIVE_BATCH", "50"))
T0 = 1_795_000_000_000
WRITES = {"insert": "documents", "update": "updates", "delete": "deletes"}


class Writes(CommandListener):
    """Documents each insert, update and delete command names, per collection."""

    def __init__(self) -> None:
        self.documents: Counter[str] = Counter()
        self.commands = 0
        self.entry_inserts: list[list[dict[str, Any]]] = []  # each insert command's entry documents

    def started(self, event: CommandStartedEvent) -> None:
        field = WRITES.get(event.command_name)
        if field is None:
            return
        self.commands += 1
        collection = str(event.command[event.command_name])
        self.documents[collection] += len(event.command.get(field, ()))
        if collection == "entries" and event.command_name == "insert":
            self.entry_inserts.append([dict(doc) for doc in event.command["documents"]])

    def clear(self) -> None:
        self.documents.clear()
        self.commands = 0
        self.entry_inserts.clear()

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass


class RawCopy:
    """What the removed `archive` collection cost: one document per thread event, as it was written."""

    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._events = database["archive"]

    async def prepare(self) -> None:
        keys = [("tenant", ASCENDING), ("subject", ASCENDING), ("thread", ASCENDING)]
        await self._events.create_index([*keys, ("partition", ASCENDING), ("offset", ASCENDING)], name="by_thread")
        await self._events.create_index(keys[:2], name="by_subject")

    async def append(self, events: Sequence[tuple[ThreadEvent, Position]]) -> None:
        docs = [
            {
                "_id": f"{p.topic}:{p.partition}:{p.offset}",
                "topic": p.topic,
                "partition": p.partition,
                "offset": p.offset,
                "tenant": e.envelope.tenant,
                "subject": e.envelope.subject,
                "thread": e.envelope.thread,
                "exchange_id": getattr(e, "exchange_id", None),
                "event_type": e.TYPE,
                "occurred_at": e.envelope.occurred_at,
                "record": to_record(e),
            }
            for e, p in events
        ]
        await self._events.insert_many(docs, ordered=False)


def exchange(n: int) -> list[ThreadEvent]:
    env = Envelope(
        tenant="bench", subject=f"player-{n % 20:03d}", thread="session", producer="bench", occurred_at=T0 + n
    )
    question = f"where did I leave the diamond pickaxe number {n}"
    calls: list[ThreadEvent] = [
        ToolCalled(env, f"x{n}", i, "recall", f'{{"query":"pickaxe","page":{i}}}', '{"facts":["chest by the gate"]}')
        for i in range(TOOL_CALLS)
    ]
    return [
        QuestionAsked(env, f"x{n}", question, original=f'{{"question":"{question}"}}'),
        *calls,
        AnswerGiven(env, f"x{n}", "In the chest by the north gate."),
    ]


@dataclass
class Row:
    label: str
    documents: Counter[str]
    commands: int
    seconds: float


def batches_of(per_batch: int) -> list[list[tuple[ThreadEvent, Position]]]:
    """EXCHANGES exchanges on their partitions' offsets, `per_batch` exchanges to a batch."""
    batches: list[list[tuple[ThreadEvent, Position]]] = []
    offset = 0
    for n in range(EXCHANGES):
        if n % per_batch == 0:
            batches.append([])
        events = exchange(n)
        batches[-1].extend((e, Position("threads", n % 20 % 6, offset + i)) for i, e in enumerate(events))
        offset += len(events)
    return batches


@asynccontextmanager
async def prepared(settings: Settings) -> AsyncIterator[tuple[Writes, Stores]]:
    """Stores in a fresh namespace, the archive's collections prepared, every write command counted."""
    scoped = isolated(settings)
    writes = Writes()
    mongo = mongo_client(scoped.mongo, event_listeners=[writes], **connections.mongo_options(scoped))
    redis = connections.redis_client(scoped)
    stores = open_stores(scoped, redis, mongo, scoped.namespace)
    try:
        await stores.conversations.prepare()
        yield writes, stores
    finally:
        await mongo.drop_database(scoped.mongo_db_name)
        await mongo.close()
        await redis.aclose()


async def measure(
    settings: Settings, label: str, raw_copy: bool, per_batch: int
) -> tuple[Row, list[list[dict[str, Any]]]]:
    """The step's writes (and the raw copy's), with the entry documents it inserted, command by command."""
    async with prepared(settings) as (writes, stores):
        raw = RawCopy(stores.database) if raw_copy else None
        if raw is not None:
            await raw.prepare()
        step = ArchiveStep(stores.archive_checkpoints, stores.conversations)
        batches = batches_of(per_batch)
        writes.clear()
        started = time.perf_counter()
        for batch in batches:
            if raw is not None:
                await raw.append(batch)
            await step(batch)
        seconds = time.perf_counter() - started
        row = Row(label, Counter(writes.documents), writes.commands, seconds)
        return row, list(writes.entry_inserts)


def merged(inserts: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """The same entries as one document per exchange (texts and originals in a list, terms joined):
    a layout memlog does not have, measured only for its floor."""
    out: list[list[dict[str, Any]]] = []
    for docs in inserts:
        by_exchange: dict[Any, dict[str, Any]] = {}
        for doc in docs:
            key = (doc["tenant"], doc["thread"], doc["owner"], doc["conversation"], doc["exchange_id"])
            held = by_exchange.get(key)
            if held is None:
                by_exchange[key] = {**doc, "parts": [doc["text"]], "terms": list(doc["terms"])}
            else:
                held["parts"].append(doc["text"])
                held["terms"] = sorted({*held["terms"], *doc["terms"]})
        out.append(list(by_exchange.values()))
    return out


async def floor(settings: Settings, inserts: list[list[dict[str, Any]]], label: str) -> Row:
    """Raw `insert_many` of the same entry documents, command by command, into `entries` with the
    store's indexes (made by its `prepare`, before the clock starts): the server's own cost."""
    async with prepared(settings) as (writes, stores):
        entries = stores.database["entries"]
        writes.clear()
        started = time.perf_counter()
        for docs in inserts:
            await entries.insert_many(docs, ordered=False)
        seconds = time.perf_counter() - started
        return Row(label, Counter(writes.documents), writes.commands, seconds)


async def main(settings: Settings) -> None:
    before, _ = await measure(settings, "with the raw copy, 1/batch", True, 1)
    quiet, _ = await measure(settings, "entries, 1 exchange/batch", False, 1)
    loaded, inserts = await measure(settings, f"entries, {LOADED_BATCH} exchanges/batch", False, LOADED_BATCH)
    rows = [
        before,
        quiet,
        loaded,
        await floor(settings, inserts, "floor: raw insert, same entries"),
        await floor(settings, merged(inserts), "floor: 1 doc/exchange (no such)"),
    ]
    names = sorted({name for row in rows for name in row.documents})
    width = 34
    print(
        f"\narchive projection writes per exchange (1 question, {TOOL_CALLS} tool call(s), 1 answer), "
        f"{EXCHANGES} exchanges"
    )
    print(f"  {'':28}" + "".join(f"{row.label:>{width}}" for row in rows))
    for name in names:
        print(f"  {'docs to ' + name:28}" + "".join(f"{row.documents[name] / EXCHANGES:{width}.2f}" for row in rows))
    print(
        f"  {'documents written, total':28}"
        + "".join(f"{sum(row.documents.values()) / EXCHANGES:{width}.2f}" for row in rows)
    )
    print(f"  {'write commands':28}" + "".join(f"{row.commands / EXCHANGES:{width}.2f}" for row in rows))
    print(f"  {'ms per exchange':28}" + "".join(f"{row.seconds * 1000 / EXCHANGES:{width}.2f}" for row in rows))
    print(f"  {'exchanges/s':28}" + "".join(f"{EXCHANGES / row.seconds:{width}.0f}" for row in rows))
    ratio = rows[3].seconds / rows[2].seconds
    print(f"  batched step's rate as a ratio of the floor's: {ratio:.2f}")


if __name__ == "__main__":
    on_local_stack(main)
