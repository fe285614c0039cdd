"""Benchmark: what the archive projection writes to MongoDB per exchange (a question, two tool calls,
an answer), counted from the driver's own command events, with and without the raw `archive` copy
of every thread event that memlog kept until issue 17 (item 7). No assertions.

Both rows run in the same process on the local stack, each into a fresh namespace, one exchange per
batch as live traffic arrives. "with the raw copy" writes, besides the step, the documents the removed
`MongoArchiveStore` wrote (one per event, `_id` = position, its two indexes), so the difference is
that collection's cost (measured against the real store before it went, on the same stack: 10.00
documents and 4.00 write commands an exchange, as here). `MEMLOG_BENCH_ARCHIVE_EXCHANGES` sets how
many exchanges (default 300).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.monitoring import CommandFailedEvent, CommandListener, CommandStartedEvent, CommandSucceededEvent

from adapters import connections
from adapters.mongo_store import mongo_client
from adapters.wiring import open_stores
from bench.projection import on_local_stack
from config.settings import Settings
from memlog.processes import isolated
from projections.position import Position
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent, ToolCalled, to_record
from streams.steps.archive import ArchiveStep

EXCHANGES = int(os.environ.get("MEMLOG_BENCH_ARCHIVE_EXCHANGES", "300"))
T0 = 1_795_000_000_000
WRITES = {"insert": "documents", "update": "updates", "delete": "deletes"}


class Writes(CommandListener):
    """Documents each insert, update and delete command names, per collection."""

    def __init__(self) -> None:
        self.documents: Counter[str] = Counter()
        self.commands = 0

    def started(self, event: CommandStartedEvent) -> None:
        field = WRITES.get(event.command_name)
        if field is None:
            return
        self.commands += 1
        self.documents[str(event.command[event.command_name])] += len(event.command.get(field, ()))

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
    return [
        QuestionAsked(env, f"x{n}", question, original=f'{{"question":"{question}"}}'),
        ToolCalled(env, f"x{n}", 0, "recall", '{"query":"pickaxe"}', '{"facts":["chest by the gate"]}'),
        ToolCalled(env, f"x{n}", 1, "map", '{"near":"gate"}', '{"x":12,"z":-40}'),
        AnswerGiven(env, f"x{n}", "In the chest by the north gate."),
    ]


@dataclass
class Row:
    label: str
    documents: Counter[str]
    commands: int
    seconds: float


async def measure(settings: Settings, label: str, raw_copy: bool) -> Row:
    scoped = isolated(settings)
    writes = Writes()
    mongo = mongo_client(scoped.mongo, event_listeners=[writes], **connections.mongo_options(scoped))
    redis = connections.redis_client(scoped)
    stores = open_stores(scoped, redis, mongo, scoped.namespace)
    try:
        await stores.conversations.prepare()
        raw = RawCopy(stores.database) if raw_copy else None
        if raw is not None:
            await raw.prepare()
        step = ArchiveStep(stores.archive_checkpoints, stores.conversations)
        offset = 0
        batches = []
        for n in range(EXCHANGES):
            events = exchange(n)
            batches.append([(e, Position("threads", n % 20 % 6, offset + i)) for i, e in enumerate(events)])
            offset += len(events)
        writes.documents.clear()
        writes.commands = 0
        started = time.perf_counter()
        for batch in batches:
            if raw is not None:
                await raw.append(batch)
            await step(batch)
        return Row(label, Counter(writes.documents), writes.commands, time.perf_counter() - started)
    finally:
        await mongo.drop_database(scoped.mongo_db_name)
        await mongo.close()
        await redis.aclose()


async def main(settings: Settings) -> None:
    rows = [
        await measure(settings, "with the raw copy (before)", True),
        await measure(settings, "entries only (after)", False),
    ]
    names = sorted({name for row in rows for name in row.documents})
    print(f"\narchive projection writes per exchange (1 question, 2 tool calls, 1 answer), {EXCHANGES} exchanges")
    print(f"  {'':28}" + "".join(f"{row.label:>30}" for row in rows))
    for name in names:
        print(f"  {'docs to ' + name:28}" + "".join(f"{row.documents[name] / EXCHANGES:30.2f}" for row in rows))
    print(
        f"  {'documents written, total':28}"
        + "".join(f"{sum(row.documents.values()) / EXCHANGES:30.2f}" for row in rows)
    )
    print(f"  {'write commands':28}" + "".join(f"{row.commands / EXCHANGES:30.2f}" for row in rows))
    print(f"  {'ms per exchange':28}" + "".join(f"{row.seconds * 1000 / EXCHANGES:30.2f}" for row in rows))


if __name__ == "__main__":
    on_local_stack(main)
