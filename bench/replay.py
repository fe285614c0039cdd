"""Benchmark: `memlog replay` against raw aiokafka consumption of the same topics, in one run.

Writes EVENTS mixed events (exchanges on the threads topic, each carrying its token count as the API
builds them; fact changes, traced runs), sealed
per subject as the API seals them, then measures:
- raw aiokafka consumption of the threads, facts and traces topics from the start (the floor);
- the same consumption with each record Avro-decoded, then also opened (AES-GCM): the per-event work
  no replay can skip, so the ceiling of any replay's ratio to the floor;
- `replay` of each projection, and of all of them, into fresh namespaces (events/s, wall clock), each
  also as a ratio to the decode + open floor, and to that floor over the topics the replay reads alone
  (a sessions replay reads the threads topic only).
No assertions: the numbers are for reading. `python -m bench.replay [EVENTS [RUN,RUN...]]`, a RUN being
`all` or projections joined by `+` (e.g. `sessions+facts+traces`), with `/N` for N replay processes
(`sessions/2`).
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys
import time
import uuid

from aiokafka import AIOKafkaProducer

from bench.projection import consume_rate, line, on_local_stack
from bench.soak import CpuMeter, local_pids
from memlog.config.settings import Settings
from memlog.dev.localstack import LocalStack
from memlog.services import open_backends, open_services
from projections.tokens import TokenCounter, load_encoding
from schemas.events import (
    Envelope,
    FactRemembered,
    ModelStep,
    RunTraced,
    record_key,
    to_record,
)
from schemas.exchanges import ReportedExchange, exchange_events
from streams.projectors import PROJECTIONS
from streams.replay import replay
from streams.topics import ensure_topics

SUBJECTS = 2000
TOPICS = ("threads", "facts", "traces")
# the topics each projection's replay reads (streams.worker.build_projections: facts also counts activity
# from the threads topic)
READS = {"sessions": ("threads",), "archives": ("threads",), "facts": ("facts", "threads"), "traces": ("traces",)}


def exchange_payload(subject: str, number: int) -> dict[str, object]:
    """The bench's exchange number `number`: a question, one tool call with its result, an answer."""
    return {
        "tenant": "bench",
        "subject": subject,
        "question": f"what is in chest {number}?",
        "tool_calls": [{"name": "open_chest", "arguments": {"id": number}, "result": {"n": number % 64}}],
        "answer": f"{number % 64} diamonds",
    }


async def produce(settings: Settings, total: int) -> dict[str, int]:
    """Mixed events: per 10 events about 8 exchange events, 1 fact, 1 traced run."""
    counts = {"threads": 0, "facts": 0, "traces": 0}
    async with open_services(settings) as services:
        await services.vault.prepare()  # as the API and the worker do on start
        keys = {}
        for number in range(SUBJECTS):
            subject = f"player-{number:04d}"
            keys[subject] = await services.vault.key_for_write("bench", subject)
        producer = AIOKafkaProducer(
            bootstrap_servers=settings.bootstrap, linger_ms=20, max_batch_size=512 * 1024, acks=1
        )
        await producer.start()
        from projections.sealing import needs_seal, seal

        count_tokens = TokenCounter(load_encoding(settings.tokenizer, settings.tokenizer_file))

        def encode(event: object) -> bytes:
            record = to_record(event)  # type: ignore[arg-type]
            name = event.TYPE  # type: ignore[attr-defined]
            if needs_seal(name):
                key_id, key = keys[record["envelope"]["subject"]]
                record = seal(name, record, key_id, key)
            return services.codec.encode(name, record)

        produced = 0
        number = 0
        pending = []
        started = time.perf_counter()
        while produced < total:
            subject = f"player-{number % SUBJECTS:04d}"
            key = record_key("bench", subject)
            env = Envelope(tenant="bench", subject=subject, thread="session", producer="bench")
            kind = number % 4
            if kind == 3 and number % 8 == 3:
                event: object = FactRemembered(env, f"f-{number}", "shared", f"likes block {number}")
                topic = "facts"
            elif kind == 3:
                now = env.occurred_at
                step = ModelStep(0, "m", f"prompt {number}", f"output {number}", 10, 5, now - 500, 400)
                event = RunTraced(env, f"run-{number}", "ok", now - 1000, now, (step,))
                topic = "traces"
            else:
                # as the API builds them: each event carries its text's token count
                exchange = ReportedExchange.from_payload(exchange_payload(subject, number))
                for item in exchange_events(exchange, producer="bench", count_tokens=count_tokens):
                    pending.append(await producer.send(settings.threads_topic, encode(item), key=key))
                produced += 3
                counts["threads"] += 3
                number += 1
                continue
            pending.append(await producer.send(settings.topic(topic), encode(event), key=key))
            produced += 1
            counts[topic] += 1
            number += 1
            if len(pending) > 20_000:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
        await producer.stop()
        print(f"produced {produced:,} events ({counts}) in {time.perf_counter() - started:.1f}s", flush=True)
    return counts


class ReplayCpu:
    """CPU each part used during one replay: this process, the replay processes it spawned (counted once
    they have ended) and the local services. Against the wall clock it says how many of the machine's
    cores the replay kept busy, and what Kafka and Redis took of them: the share `--workers` cannot have."""

    def __init__(self, services: dict[str, int]) -> None:
        self._meter = CpuMeter({"replay (this process)": os.getpid(), **services})
        self._children = self._spawned()

    @staticmethod
    def _spawned() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def report(self, events: int, seconds: float) -> None:
        used = self._meter.used()
        used["replay processes (--workers)"] = self._spawned() - self._children
        total = sum(used.values())
        print(f"  CPU during it, per 1,000 events (of {os.cpu_count()} cores, {total / seconds:.2f} busy):")
        for name, value in sorted(used.items(), key=lambda row: -row[1]):
            if value > 0:
                print(f"    {name:34} {value * 1000 / max(events, 1) * 1000:8.1f} ms  ({value / seconds:.2f} cores)")


async def run(settings: Settings) -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    settings = settings.model_copy(update={"privacy_database": f"benchprivacy_{settings.namespace}"})
    await ensure_topics(settings)
    counts = await produce(settings, total)
    produced = sum(counts.values())
    raw = await consume_rate(settings, produced, TOPICS)
    print(f"\nreplay of {produced:,} mixed events (events/s; one run, 2 shared cores):")
    line("raw aiokafka consume of the same topics (the floor)", raw, "events/s")
    # what any replay must do per event besides consuming: decode the Avro body, open the sealed fields
    decode_only = await consume_rate(settings, produced, TOPICS, decode=True)
    line("raw consume + Avro decode of every record", decode_only, "events/s")
    print(f"  ratio, consume + decode / raw consume: {decode_only / raw:.4f}", flush=True)
    decode_open = await consume_rate(settings, produced, TOPICS, decode=True, open_sealed=True)
    line("raw consume + Avro decode + AES-GCM open", decode_open, "events/s")
    print(f"  ratio, consume + decode + open / raw consume: {decode_open / raw:.4f}", flush=True)
    # a replay reads only its projections' topics: its like-for-like floor is the decode + open of those
    # records alone (a threads event, with its tool call and its sealed texts, costs more than the mix)
    floors = {TOPICS: decode_open}
    runs = sys.argv[2].split(",") if len(sys.argv) > 2 else ["sessions", "facts", "traces", "archives", "all"]
    for run_spec in runs:
        spec, _, workers = run_spec.partition("/")
        which = PROJECTIONS if spec == "all" else tuple(spec.split("+"))
        read = tuple(topic for topic in TOPICS if any(topic in READS[name] for name in which))
        if read not in floors:
            floors[read] = await consume_rate(
                settings, sum(counts[topic] for topic in read), read, decode=True, open_sealed=True
            )
            line(f"raw consume + decode + open of {'+'.join(read)} alone", floors[read], "events/s")
        cpu = ReplayCpu(local_pids(LocalStack(Settings())))
        report = await replay(
            settings,
            which,
            open_backends=open_backends,
            switch=False,
            namespace=f"{settings.namespace}-{uuid.uuid4().hex[:6]}",
            out=sys.stdout,
            workers=int(workers or 1),
        )
        line(
            f"replay --projection {spec} --workers {workers or 1} ({report.events:,} events, {report.seconds:.1f}s)",
            report.rate,
            "events/s",
        )
        print(f"  ratio, replay {run_spec} / raw consume: {report.rate / raw:.4f}", flush=True)
        # the measure: against the least any replay must do per event (consume, decode, open)
        print(f"  ratio, replay {run_spec} / decode + open floor: {report.rate / decode_open:.4f}", flush=True)
        print(
            f"  ratio, replay {run_spec} / decode + open floor of {'+'.join(read)}: {report.rate / floors[read]:.4f}",
            flush=True,
        )
        cpu.report(report.events, report.seconds)


if __name__ == "__main__":
    on_local_stack(run)
