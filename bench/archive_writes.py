"""Benchmark: what the archive projection writes to MongoDB per exchange (a question, tool calls, an
answer), counted from the driver's own command events, beside the raw floors. No assertions.

Every row runs in the same process on the local stack, each into a fresh namespace:
- the step, one exchange per batch; with the exchanges of a loaded worker's batch together
  (`MEMLOG_BENCH_ARCHIVE_BATCH`, default 50 exchanges: the worker applies up to 500 records a batch);
  and one event per batch (question, tool calls and answer each its own batch: the quietest live
  traffic, where the exchange's group grows by an update per event);
- the floor: raw `insert_many` of the very group documents the batched step wrote (captured from its
  insert commands), in the same batches, into a collection with the same indexes: what the
  MongoDB-protocol server allows for one document per exchange, whatever memlog does around it;
- the layout before issue 16 (item 2) at its floor: the same entries one document each, with that
  layout's indexes, inserted raw the same way.

The README keeps the figures of the layouts before (one document per entry; and a raw copy of every
event besides, before issue 17), measured with the code of their time.

`MEMLOG_BENCH_ARCHIVE_EXCHANGES` sets how many exchanges (default 300), `MEMLOG_BENCH_ARCHIVE_TOOL_CALLS`
how many tool calls each has (default 1, as issue 16 counts).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pymongo import ASCENDING
from pymongo.monitoring import CommandFailedEvent, CommandListener, CommandStartedEvent, CommandSucceededEvent

from bench.projection import on_local_stack
from memlog.adapters import connections
from memlog.adapters.mongo_entries import GROUPS, entries_of
from memlog.adapters.mongo_store import mongo_client
from memlog.adapters.wiring import open_stores
from memlog.config.settings import Settings
from memlog.dev.processes import isolated
from projections.archives import index_terms
from projections.position import Position
from projections.stores import Stores
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent, ToolCalled
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
        self.entry_inserts: list[list[dict[str, Any]]] = []  # each insert command's group documents

    def started(self, event: CommandStartedEvent) -> None:
        field = WRITES.get(event.command_name)
        if field is None:
            return
        self.commands += 1
        collection = str(event.command[event.command_name])
        self.documents[collection] += len(event.command.get(field, ()))
        if collection == GROUPS and event.command_name == "insert":
            self.entry_inserts.append([dict(doc) for doc in event.command["documents"]])

    def clear(self) -> None:
        self.documents.clear()
        self.commands = 0
        self.entry_inserts.clear()

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass


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


def batches_of(per_batch: int, split: bool = False) -> list[list[tuple[ThreadEvent, Position]]]:
    """EXCHANGES exchanges on their partitions' offsets, `per_batch` exchanges to a batch (`split`: each
    event a batch of its own)."""
    batches: list[list[tuple[ThreadEvent, Position]]] = []
    offset = 0
    for n in range(EXCHANGES):
        if n % per_batch == 0:
            batches.append([])
        events = exchange(n)
        batches[-1].extend((e, Position("threads", n % 20 % 6, offset + i)) for i, e in enumerate(events))
        offset += len(events)
    return [[event] for batch in batches for event in batch] if split else batches


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
    settings: Settings, label: str, per_batch: int, split: bool = False
) -> tuple[Row, list[list[dict[str, Any]]]]:
    """The step's writes, with the group documents it inserted, command by command."""
    async with prepared(settings) as (writes, stores):
        step = ArchiveStep(stores.archive_checkpoints, stores.conversations)
        batches = batches_of(per_batch, split)
        writes.clear()
        started = time.perf_counter()
        for batch in batches:
            await step(batch)
        seconds = time.perf_counter() - started
        row = Row(label, Counter(writes.documents), writes.commands, seconds)
        return row, list(writes.entry_inserts)


def per_entry(inserts: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """The same entries one document each, as the layout before issue 16 kept them."""
    out = []
    for groups in inserts:
        docs = []
        for doc in entries_of(groups):
            doc.pop("group")
            doc.pop("id")
            docs.append({**doc, "terms": list(index_terms(doc["text"]))})
        out.append(docs)
    return out


PREFIX = [("tenant", ASCENDING), ("thread", ASCENDING), ("owner", ASCENDING)]
CONVERSATION = [*PREFIX, ("conversation", ASCENDING)]
ENTRY_INDEXES = [  # the layout before issue 16 (item 2): memlog/adapters/mongo_archives.py and its mixins then
    ([*CONVERSATION, ("entry_id", ASCENDING)], True),
    ([*CONVERSATION, ("seq", ASCENDING)], False),
    ([*PREFIX, ("terms", ASCENDING)], False),
    ([("tenant", ASCENDING), ("subject", ASCENDING)], False),
    ([*PREFIX, ("occurred_at", ASCENDING)], False),
    ([*CONVERSATION, ("n", ASCENDING)], False),
    ([("tenant", ASCENDING), ("agent", ASCENDING), ("terms", ASCENDING)], False),
]


async def floor(settings: Settings, inserts: list[list[dict[str, Any]]], label: str, *, entries: bool) -> Row:
    """Raw `insert_many` of the same documents, command by command, into a collection with the indexes
    of their layout (made before the clock starts): the server's own cost."""
    async with prepared(settings) as (writes, stores):
        if entries:
            target = stores.database["entries_floor"]
            for keys, unique in ENTRY_INDEXES:
                await target.create_index(keys, unique=unique)
        else:
            target = stores.database[GROUPS]
        writes.clear()
        started = time.perf_counter()
        for docs in inserts:
            await target.insert_many(docs, ordered=False)
        seconds = time.perf_counter() - started
        return Row(label, Counter(writes.documents), writes.commands, seconds)


async def main(settings: Settings) -> None:
    split, _ = await measure(settings, "1 event/batch", 1, split=True)
    quiet, _ = await measure(settings, "1 exchange/batch", 1)
    loaded, inserts = await measure(settings, f"{LOADED_BATCH} exchanges/batch", LOADED_BATCH)
    rows = [
        split,
        quiet,
        loaded,
        await floor(settings, inserts, "floor: raw insert, same groups", entries=False),
        await floor(settings, per_entry(inserts), "floor: 1 doc/entry (before)", entries=True),
    ]
    names = sorted({name for row in rows for name in row.documents})
    width = 32
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
    print(f"  batched step's rate as a ratio of its floor's: {rows[3].seconds / rows[2].seconds:.2f}")
    print(f"  batched step's rate as a ratio of the floor before: {rows[4].seconds / rows[2].seconds:.2f}")


if __name__ == "__main__":
    on_local_stack(main)
