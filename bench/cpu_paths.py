"""Two of issue 38's cuts measured in one process, each against the way before it, in alternating rounds, in
CPU time (time.process_time), which holds up on a loaded machine far better than a soak's totals:

- the POST: POST /v1/exchanges through the whole app (ASGI in process, the real broker, Redis and
  MongoDB) against the same app without its exchange shortcut (memlog/api/exchange_shortcut.py). The
  client's own work (httpx) is counted on both sides, so the ratio understates the cut.
- the read: three projectors of the threads topic reading the same sealed records, each on its own,
  against the same three sharing their reads (streams/shared_reads.py).

    python -m bench.cpu_paths --posts 300 --records 3000 --rounds 4

No assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import httpx

from bench.projection import on_local_stack
from memlog.adapters.in_memory import InMemoryCheckpoints
from memlog.adapters.in_memory.privacy import InMemoryKeyVault
from memlog.api.app import create_api
from memlog.api.exchange_shortcut import ExchangeShortcut
from memlog.config.settings import Settings
from memlog.services import open_services
from projections.position import Position
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ToolCalled, to_record
from streams.projector import Projector, Record
from streams.sealer import Sealer
from streams.shared_reads import SharedReads
from streams.topics import ensure_topics

READERS = ("sessions", "archive", "facts-activity")
CONCURRENCY = 16


async def posts(settings: Settings, count: int, rounds: int) -> None:
    await ensure_topics(settings)
    plain, full = create_api(settings), create_api(settings)
    plain.user_middleware = [m for m in plain.user_middleware if m.cls is not ExchangeShortcut]  # type: ignore[comparison-overlap]

    async with open_services(settings, producer=True) as services:
        plain.state.services = full.state.services = services
        clients = {
            name: httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api", timeout=60)
            for name, app in (("FastAPI route", plain), ("shortcut", full))
        }
        used = dict.fromkeys(clients, 0.0)
        number = 0
        for round_ in range(rounds + 1):  # the first round warms both up and is not counted
            order = list(clients.items())
            for name, client in order if round_ % 2 else reversed(order):  # each goes first in turn
                began = time.process_time()
                for start in range(0, count, CONCURRENCY):
                    bodies = [exchange(number + n) for n in range(min(CONCURRENCY, count - start))]
                    number += len(bodies)
                    answers = await asyncio.gather(*(client.post("/v1/exchanges", json=b) for b in bodies))
                    assert all(a.status_code == 202 for a in answers), answers[0].text
                if round_:
                    used[name] += time.process_time() - began
        for client in clients.values():
            await client.aclose()
    print(f"POST /v1/exchanges, CPU of this process per POST ({count} a round, {rounds} rounds, {CONCURRENCY} at once)")
    for name, seconds in used.items():
        print(f"  {name:14} {seconds * 1000 / (count * rounds):6.3f} ms")
    print(f"  shortcut / route: {used['shortcut'] / used['FastAPI route']:.2f}")


def exchange(number: int) -> dict[str, Any]:
    subject = f"s{number % 200:05d}"
    return {
        "tenant": "cpu",
        "subject": subject,
        "question": f"{subject} q{number}",
        "tool_calls": [{"name": "count", "arguments": {"n": number}, "result": number}],
        "answer": f"a{number}",
    }


class Letters:
    async def send(self, key: bytes | None, value: bytes) -> None:
        pass


class Counted:
    async def count_dead_letter(self, topic: str) -> None:
        pass


async def ignore(events: Sequence[tuple[Any, Position]]) -> None:
    pass


async def reads(count: int, rounds: int) -> None:
    codec = Codec(Catalog())
    sealer = Sealer(InMemoryKeyVault(os.urandom(32)), cache_seconds=3600)
    records: list[Record] = []
    for n in range(count):
        env = Envelope(tenant="cpu", subject=f"s{n % 200:05d}", thread="session", producer="bench")
        for event in (
            QuestionAsked(env, f"x{n}", f"question {n}"),
            ToolCalled(env, f"x{n}", 0, "count", f'{{"n": {n}}}', str(n)),
            AnswerGiven(env, f"x{n}", f"answer {n}"),
        ):
            value = codec.encode(event.TYPE, await sealer.seal(event.TYPE, to_record(event)))
            records.append(Record(n % 6, len(records), None, value))

    def three(shared: SharedReads | None) -> list[Projector[Any]]:
        return [
            Projector(
                name=name,
                topic="threads",
                source_topic="bench.threads",
                codec=codec,
                accepts=(QuestionAsked, ToolCalled, AnswerGiven),
                step=ignore,
                checkpoints=InMemoryCheckpoints(),
                dead_letters=Letters(),
                counter=Counted(),  # type: ignore[arg-type]
                sealer=sealer,
                shared=shared,
            )
            for name in READERS
        ]

    used = {"each its own": 0.0, "shared": 0.0}
    batch = 100
    for round_ in range(rounds + 1):
        for name in used:
            projectors = three(SharedReads(READERS) if name == "shared" else None)
            began = time.process_time()
            for start in range(0, len(records), batch):
                for projector in projectors:
                    await projector.handle(records[start : start + batch])
            if round_:
                used[name] += time.process_time() - began
    events = len(records) * rounds
    print(f"three projectors of the threads topic, CPU per thread event ({len(records)} events a round):")
    for name, seconds in used.items():
        print(f"  {name:14} {seconds * 1_000_000 / events:7.1f} us")
    print(f"  shared / each its own: {used['shared'] / used['each its own']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--posts", type=int, default=300)
    parser.add_argument("--records", type=int, default=3000, help="exchanges (three events each) for the read")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request would be most of the work
    print(f"load average before: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    asyncio.run(reads(args.records // 3, args.rounds))
    on_local_stack(lambda settings: posts(settings, args.posts, args.rounds))
    print(f"load average after: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
