"""Benchmark: a sessions replay's per-event work, stage by stage, in memory, in one run.

The same exchanges as `bench.replay` (question, one tool call, answer; 2,000 subjects; each event
sealed under its subject's key and carrying its token count), encoded once, then taken through the
stages a sessions replay runs for every batch of one partition, with no Kafka, Redis or MongoDB:
- decode the Avro body and open the sealed fields (AES-GCM): the decode + open floor's own work;
- build and validate each event (`from_record`);
- the session rules: which thread state the batch needs, recalled from the replay's memory,
  `plan_batch`, `coalesce`, and the memory following the writes;
- the store's arguments: each thread's exchanges as JSON and its ready fragments, as the Redis store
  sends them (its round trip itself is not here).

It says how far a replay can come to the decode + open floor in one process: even with Kafka and Redis
free, a replay costs the floor's work plus the rest. It prints floor / (floor + rest), and the budget
0.6 of the floor leaves for the rest (two thirds of the floor's time per event; Kafka's fetch, part of
the floor as `bench.replay` measures it, adds its share to that budget).
No assertions: the numbers are for reading. `python -m bench.replay_stages [EVENTS [ROUNDS]]`.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.replay import exchange_payload
from memlog.adapters.redis_store import RedisSessionStore
from memlog.adapters.wiring import make_codec
from memlog.config.settings import Settings
from projections.position import Position
from projections.sealing import new_data_key, open_sealed, seal, sealed_key_id
from projections.session import Loaded, ThreadPolicy, plan_batch
from projections.thread_memory import ThreadMemory, coalesce
from projections.tokens import TokenCounter, load_encoding
from schemas.codec import Codec
from schemas.events import Event, from_record, to_record
from schemas.exchanges import ReportedExchange, exchange_events
from streams.rebuild import COLLECTOR
from streams.steps.sessions import state_wanted

SUBJECTS = 2000
BATCH = 3300  # about one partition's share of a replay batch (20,000 events over 6 partitions)
STAGES = ("decode", "open", "from_record", "session rules", "store arguments")


def encoded_events(codec: Codec, count_tokens: TokenCounter, total: int) -> tuple[list[bytes], dict[str, bytes]]:
    """`total` exchange events as the API produces them, sealed per subject; and the data keys by id."""
    keys = {f"key-{number}": new_data_key() for number in range(SUBJECTS)}
    out: list[bytes] = []
    number = 0
    while len(out) < total:
        subject = f"player-{number % SUBJECTS:04d}"
        key_id = f"key-{number % SUBJECTS}"
        exchange = ReportedExchange.from_payload(exchange_payload(subject, number))
        for event in exchange_events(exchange, producer="bench", count_tokens=count_tokens):
            record = seal(event.TYPE, to_record(event), key_id, keys[key_id])
            out.append(codec.encode(event.TYPE, record))
        number += 1
    return out, keys


def replay_in_memory(
    codec: Codec, keys: dict[str, bytes], values: list[bytes], count_tokens: TokenCounter
) -> dict[str, float]:
    """Seconds per stage for the whole of `values`, batch by batch."""
    spent = dict.fromkeys(STAGES, 0.0)
    policy = ThreadPolicy()
    memory = ThreadMemory()
    clock = time.perf_counter
    now = 1  # nothing expires: the events' times are the present
    for start in range(0, len(values), BATCH):
        batch = values[start : start + BATCH]
        began = clock()
        decoded = [codec.decode(value) for value in batch]
        decoded_at = clock()
        opened = []
        for item in decoded:
            key_id = sealed_key_id(item.record)
            opened.append(item.record if key_id is None else open_sealed(item.full_name, item.record, keys[key_id]))
        opened_at = clock()
        events: list[Event] = [
            from_record(item.full_name, record) for item, record in zip(decoded, opened, strict=True)
        ]
        built_at = clock()
        run = [(event, Position("threads", 0, start + index)) for index, event in enumerate(events)]
        wanted = state_wanted(run)  # type: ignore[arg-type]
        threads = list(dict.fromkeys(key for key, _ in wanted))
        # the versions the store would answer: the memory's own for the threads it keeps, none for new ones
        memory.check({key: memory.version(key) for key in threads})
        known, missing = memory.recall(wanted)
        loaded: Loaded = {**known, **dict.fromkeys(missing, (None, None))}
        plan = plan_batch(run, loaded, policy=policy, now_ms=now, count_tokens=count_tokens)  # type: ignore[arg-type]
        writes = coalesce(plan.writes, memory.threads, now)
        ruled_at = clock()
        by_thread: dict[Any, list[int]] = {}
        for index, write in enumerate(writes):
            if write.key is not None and write.change is not None:
                by_thread.setdefault(write.key, []).append(index)
        for key, indexes in by_thread.items():
            RedisSessionStore._thread_args(key, indexes, writes, now)
        argued_at = clock()
        memory.remember(writes, plan.heads, now)
        spent["session rules"] += ruled_at - built_at + clock() - argued_at
        spent["decode"] += decoded_at - began
        spent["open"] += opened_at - decoded_at
        spent["from_record"] += built_at - opened_at
        spent["store arguments"] += argued_at - ruled_at
    return spent


def _per_event(seconds: float, events: int) -> float:
    return seconds * 1e6 / events


def report(spent: dict[str, float], events: int, out: Callable[[str], Any] = print) -> None:
    floor = spent["decode"] + spent["open"]
    rest = sum(spent.values()) - floor
    for stage in STAGES:
        out(f"  {stage:34} {_per_event(spent[stage], events):8.1f} us/event")
    out(f"  {'decode + open (the floor work)':34} {_per_event(floor, events):8.1f} us/event")
    out(f"  {'everything else, no I/O':34} {_per_event(rest, events):8.1f} us/event")
    out(f"  best ratio to the decode + open floor, Kafka and Redis free: {floor / (floor + rest):.3f}")
    # 0.6 of the floor leaves two thirds of the floor's time per event for everything else; the fetch from
    # Kafka, in the floor and in any replay alike, adds its share to that budget (bench.replay measures it)
    out(f"  what 0.6 of this floor leaves for everything else: {_per_event(floor, events) * 2 / 3:8.1f} us/event")


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 150_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    settings = Settings()
    codec = make_codec(settings)
    count_tokens = TokenCounter(load_encoding(settings.tokenizer, settings.tokenizer_file))
    values, keys = encoded_events(codec, count_tokens, total)
    print(f"a sessions replay's stages in memory, {len(values):,} events, {rounds} rounds (one process):")
    for number in range(rounds):
        gc.collect()
        COLLECTOR.enter()  # the collector as a replay runs it
        try:
            spent = replay_in_memory(codec, keys, values, count_tokens)
        finally:
            COLLECTOR.leave()
        print(f" round {number + 1}:")
        report(spent, len(values))
    codec.close()


if __name__ == "__main__":
    main()
