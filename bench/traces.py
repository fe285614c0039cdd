"""Benchmark: traces projected per second for runs of about 150 KB, next to a raw MongoDB insert of the
same documents in the same run. No assertions."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bench.projection import on_local_stack
from memlog.config.settings import Settings
from memlog.dev.processes import start_worker
from memlog.services import open_services
from projections.traces import redact_run, trace_document
from schemas.events import Envelope, ModelStep, RunTraced, TraceToolCall, now_ms, to_record
from streams.topics import ensure_topics

LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"
RUNS = 300


def run(number: int) -> RunTraced:
    end = now_ms()
    chunk = 7_500
    steps = tuple(
        ModelStep(
            2 * i, "large-2", f"prompt {number} {i} " + "p" * chunk, "o" * 200, 1000, 100, end - 20_000 + i * 2000, 900
        )
        for i in range(10)
    )
    calls = tuple(
        TraceToolCall(2 * i + 1, "search", '{"q":"x"}', '"' + "r" * chunk + '"', True, end - 19_000 + i * 2000, 300)
        for i in range(10)
    )
    envelope = Envelope(
        tenant="bench",
        subject=f"player-{number % 50}",
        agent="allay",
        thread="session",
        producer="bench",
        occurred_at=end,
    )
    return RunTraced(envelope, f"run-{number}", "ok", end - 20_000, end, steps, calls)


async def main(settings: Settings) -> None:
    await ensure_topics(settings)
    redactor = settings.redactor()
    runs = [redact_run(run(n), redactor) for n in range(RUNS)]
    async with open_services(settings, producer=True) as services:
        size = len(services.codec.encode(RunTraced.TYPE, to_record(runs[0])))
        last = None
        for item in runs:
            last = await services.producer.produce([item])
        assert last is not None
        # the floor: the same documents, inserted raw into a collection of their own
        docs = [trace_document(item, redactor, 7) for item in runs]
        raw = services.database["raw_traces"]
        started = time.perf_counter()
        for start in range(0, RUNS, 50):
            await raw.insert_many([dict(doc) for doc in docs[start : start + 50]], ordered=False)
        raw_rate = RUNS / (time.perf_counter() - started)
        worker = await asyncio.to_thread(start_worker, settings, LOGS)
        try:
            started = time.perf_counter()
            while await services.traces.applied("traces", last.partition) < last.offset or (
                await services.database["traces"].count_documents({}) < RUNS
            ):
                await asyncio.sleep(0.05)
            projected_rate = RUNS / (time.perf_counter() - started)
        finally:
            worker.stop()
    print(f"\n{RUNS} runs of {size:,} bytes each (encoded):")
    print(f"  {'raw MongoDB insert_many of the same documents':48} {raw_rate:10.1f} runs/s")
    print(f"  {'memlog trace projection (decode, redact, insert)':48} {projected_rate:10.1f} runs/s")
    print(f"  ratio, projection / raw insert: {projected_rate / raw_rate:.2f}")


if __name__ == "__main__":
    on_local_stack(main)
