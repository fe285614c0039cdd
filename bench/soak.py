"""Soak: a steady stream of exchanges for a long while, the worker SIGKILLed and restarted on a schedule.

Produces RATE exchanges a second (question, one tool call, answer: three events) onto Kafka with
memlog's producer, for MINUTES, spread over subjects so each subject's exchanges stay in order. Every
KILL_EVERY minutes the worker is killed with SIGKILL (no clean shutdown, no final commit) and started
again. Every few seconds it samples each projection's lag (records on the threads topic not yet
applied) and the worker's resident memory. At the end it waits for the projections to catch up and
reads every session back: each exchange must be there exactly once, in order.

    python -m bench.soak                       # the issue's soak: 500/s for 30 min, a kill every 5 min
    python -m bench.soak --rate 100 --minutes 3 --kill-every 1
    python -m bench.soak --rate 100 --minutes 3 --kill-every 1 --via http   # POSTed, as backends record

Folds are off (MEMLOG_FOLD_AGENT=false) so that a session keeps every exchange to be counted. The
worker is restarted under one name (MEMLOG_WORKER_INSTANCE, as `memlog up` restarts its worker), so it
takes its partitions back as soon as it is up; `--dynamic` restarts it as a new member instead, which
waits out the killed one's session (MEMLOG_WORKER_SESSION_TIMEOUT_SECONDS). `--split` runs two workers,
one per worker set (MEMLOG_WORKER_PROJECTIONS: sessions and facts; the rest), and kills both at once.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiokafka import AIOKafkaConsumer, TopicPartition

from memlog.adapters.connections import kafka_options
from memlog.app.conversations import conversation_ref
from memlog.config.settings import Settings
from memlog.dev.localstack import LocalStack
from memlog.dev.processes import MemlogProcess, free_port, isolated, start_api, start_worker
from memlog.services import Services, open_services
from projections.session import ThreadKey
from schemas.errors import LogUnavailable
from streams.topics import ensure_topics

LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"
TENANT = "soak"
TICK_SECONDS = 0.1
SPLIT = ("sessions,facts", "archives,traces,privacy")


@dataclass
class Samples:
    at: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    lag: dict[str, list[int]] = field(default_factory=dict)
    kills: list[float] = field(default_factory=list)
    produced: int = 0
    produce_retries: int = 0


async def session_questions(services: Services, subject: str) -> list[str]:
    session = await services.sessions.read(ThreadKey.session(TENANT, subject))
    return [e.question for e in session.exchanges] if session else []


async def archived_questions(services: Services, subject: str) -> list[str]:
    """The questions of the subject's archived conversation, paged as the transcript export pages them."""
    ref = conversation_ref(TENANT, f"session:{subject}", "main")
    found: list[str] = []
    cursor: str | None = None
    while True:
        page = await services.threads(read_only=True).export(ref, archives="current", limit=500, cursor=cursor)
        found += [e["text"] for e in page["entries"] if e["entry_id"].endswith(".q")]
        cursor = page["next_cursor"]
        if not cursor:
            return found


def rss_mb(pid: int) -> float:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used so far (its own threads, not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def local_pids(local: LocalStack) -> dict[str, int]:
    """The local services' pids by name, when this machine runs them (none for external ones); read from
    their pid files, so it may be called inside a running event loop."""
    return {
        f"local {service.name}": pid
        for service in local.services
        if not service.external and (pid := service.managed_pid()) is not None
    }


class CpuMeter:
    """The CPU each of some named processes has used since the meter was made."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._pids = dict(pids)
        self._start = {name: cpu_seconds(pid) for name, pid in self._pids.items()}

    def used(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) - self._start[name] for name, pid in self._pids.items()}


class CpuBudget:
    """CPU each part of the run used: the local services (when this machine runs them), the worker
    (each one killed counted until its kill) and this process, which produces. Divided by the
    exchanges, it says what one exchange costs the machine, so what rate its cores could carry at most."""

    def __init__(self, services: dict[str, int]) -> None:
        self._meter = CpuMeter({"this process (producer, sampler)": os.getpid(), **services})
        self.used: dict[str, float] = {}
        self.worker = 0.0

    def worker_ends(self, pid: int, started: float) -> None:
        self.worker += cpu_seconds(pid) - started

    def close(self) -> None:
        self.used = self._meter.used()

    def report(self, exchanges: int) -> None:
        if not exchanges or not self.used:
            return
        rows = {**self.used, "worker (all its runs)": self.worker}
        total = sum(rows.values())
        cores = os.cpu_count() or 1
        print(f"CPU per exchange, over {exchanges:,} exchanges (produce, apply, catch up):")
        for name, seconds in sorted(rows.items(), key=lambda row: -row[1]):
            print(f"  {name:36} {seconds * 1000 / exchanges:8.2f} ms")
        print(
            f"  {'total':36} {total * 1000 / exchanges:8.2f} ms: at most {cores / total * exchanges:,.0f} "
            f"exchanges/s on this machine's {cores} cores, were nothing else running"
        )


def percentile(values: list[int], share: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(len(ordered) * share))]) if ordered else 0.0


Send = Callable[[dict[str, Any]], Awaitable[object]]


def http_send(http: aiohttp.ClientSession) -> Send:
    """An exchange POSTed to the API, as backends record; a refusal the service may lift (503) is LogUnavailable."""

    async def send(payload: dict[str, Any]) -> object:
        try:
            async with http.post("/v1/exchanges", json=payload) as answer:
                body = await answer.read()
        except aiohttp.ClientError as exc:
            raise LogUnavailable(f"POST /v1/exchanges: {exc}") from exc
        if answer.status == 503:
            raise LogUnavailable("POST /v1/exchanges: 503")
        if answer.status != 202:
            raise RuntimeError(f"POST /v1/exchanges: {answer.status} {body[:300]!r}")
        return body

    return send


async def produce(send: Send, rate: int, seconds: float, subjects: int, samples: Samples) -> list[int]:
    """Exchanges at a steady rate, by the clock (a slow tick is caught up); returns the count per subject."""
    counts = [0] * subjects
    started = time.monotonic()
    next_subject = 0

    async def one(subject: int, number: int) -> None:
        payload = {
            "tenant": TENANT,
            "subject": f"s{subject:05d}",
            "question": f"s{subject:05d} q{number}",
            "tool_calls": [{"name": "count", "arguments": {"n": number}, "result": number}],
            "answer": f"a{number}",
        }
        while True:
            try:
                await send(payload)
                return
            except LogUnavailable:
                samples.produce_retries += 1
                await asyncio.sleep(0.5)

    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate) + 1 - samples.produced
        batch = []
        for _ in range(max(0, min(due, subjects))):  # one exchange per subject per tick keeps each in order
            batch.append(one(next_subject, counts[next_subject]))
            counts[next_subject] += 1
            next_subject = (next_subject + 1) % subjects
        await asyncio.gather(*batch)
        samples.produced += len(batch)
        await asyncio.sleep(max(0.0, TICK_SECONDS - (time.monotonic() - started - elapsed)))
    return counts


async def lag_now(consumer: AIOKafkaConsumer, services: Services, settings: Settings) -> dict[str, int]:
    partitions = [TopicPartition(settings.threads_topic, p) for p in range(settings.partitions)]
    ends = await consumer.end_offsets(partitions)
    lags: dict[str, int] = {}
    for name, checkpoints in (
        ("sessions", services.sessions),
        ("archive", services.archive_checkpoints),
        ("facts-activity", services.fact_activity),
    ):
        total = 0
        for tp in partitions:
            total += max(0, ends[tp] - 1 - await checkpoints.applied("threads", tp.partition))
        lags[name] = total
    return lags


def worker_settings(settings: Settings, split: bool) -> list[Settings]:
    """One worker running every projection, or one per worker set, each under a name of its own."""
    if not split:
        return [settings]
    return [
        settings.model_copy(
            update={
                "worker_projections": names,
                "worker_instance": None if settings.worker_instance is None else f"{settings.worker_instance}-{n}",
            }
        )
        for n, names in enumerate(SPLIT)
    ]


async def start_workers(setups: list[Settings]) -> list[MemlogProcess]:
    return list(await asyncio.gather(*(asyncio.to_thread(start_worker, setup, LOGS) for setup in setups)))


async def soak(
    settings: Settings,
    rate: int,
    minutes: float,
    kill_every: float,
    sample_seconds: float,
    local: dict[str, int],
    split: bool = False,
    via_http: bool = False,
) -> None:
    await ensure_topics(settings)
    subjects = max(1, rate * 2)
    samples = Samples()
    setups = worker_settings(settings, split)
    workers = await start_workers(setups)
    api = await asyncio.to_thread(start_api, settings, LOGS) if via_http else None
    budget = CpuBudget({**local, **({} if api is None else {"api (HTTP, produces)": api.process.pid})})
    workers_began = [cpu_seconds(worker.process.pid) for worker in workers]
    consumer = AIOKafkaConsumer(**kafka_options(settings), enable_auto_commit=False)
    await consumer.start()
    began = time.monotonic()
    stop = asyncio.Event()
    try:
        async with (
            open_services(settings, producer=True) as services,
            aiohttp.ClientSession(
                f"http://127.0.0.1:{settings.api_port}", connector=aiohttp.TCPConnector(limit=64)
            ) as http,
        ):
            send: Send = http_send(http) if api is not None else services.producer.record_exchange

            async def sampler() -> None:
                while not stop.is_set():
                    try:
                        lags = await lag_now(consumer, services, settings)
                    except Exception as exc:  # a sample lost to a busy store is not a soak failure
                        print(f"  sample skipped: {exc}")
                    else:
                        samples.at.append(time.monotonic() - began)
                        alive = [w.process.pid for w in workers if w.process.poll() is None]
                        samples.rss_mb.append(sum(map(rss_mb, alive)) if len(alive) == len(workers) else 0.0)
                        for name, value in lags.items():
                            samples.lag.setdefault(name, []).append(value)
                    await asyncio.sleep(sample_seconds)

            async def killer() -> None:
                """Kills on the clock (every kill_every minutes from the start), however long a restart took."""
                nonlocal workers, workers_began
                for number in itertools.count(1):
                    try:
                        due = max(0.0, began + number * kill_every * 60 - time.monotonic())
                        await asyncio.wait_for(produced.wait(), due)
                        return
                    except TimeoutError:
                        pass
                    before = sum(rss_mb(worker.process.pid) for worker in workers)
                    for worker, worker_began in zip(workers, workers_began, strict=True):
                        budget.worker_ends(worker.process.pid, worker_began)
                        worker.kill()
                    samples.kills.append(time.monotonic() - began)
                    print(f"  {time.monotonic() - began:7.1f}s  worker SIGKILLed at {before:.0f} MB RSS; restarting")
                    workers = await start_workers(setups)
                    workers_began = [cpu_seconds(worker.process.pid) for worker in workers]

            produced = asyncio.Event()
            sampling = asyncio.create_task(sampler())
            killing = asyncio.create_task(killer())
            producing = time.monotonic()
            counts = await produce(send, rate, minutes * 60, subjects, samples)
            produced_in = time.monotonic() - producing
            produced.set()
            await killing  # a restart under way finishes, so the worker stopped below is the live one
            print(
                f"produced {samples.produced:,} exchanges ({samples.produced * 3:,} events) in {produced_in:.1f}s: "
                f"{samples.produced / produced_in:.1f}/s against {rate}/s asked; {samples.produce_retries} retries"
            )
            while True:
                lags = await lag_now(consumer, services, settings)
                if not any(lags.values()):
                    break
                await asyncio.sleep(1)
            print(f"caught up {time.monotonic() - producing - produced_in:.1f}s after the last exchange")
            for worker, worker_began in zip(workers, workers_began, strict=True):
                budget.worker_ends(worker.process.pid, worker_began)
            budget.close()
            stop.set()
            await sampling
            for store, read in (("sessions", session_questions), ("archive", archived_questions)):
                missing = doubled = disordered = 0
                for subject, count in enumerate(counts):
                    questions = await read(services, f"s{subject:05d}")
                    expected = [f"s{subject:05d} q{n}" for n in range(count)]
                    missing += len(set(expected) - set(questions))
                    doubled += len(questions) - len(set(questions))
                    if sorted(set(questions)) == sorted(expected) and list(dict.fromkeys(questions)) != expected:
                        disordered += 1
                once = not (missing or doubled or disordered)
                print(
                    f"{store}: read back {sum(counts):,} exchanges of {subjects} subjects: {missing} missing, "
                    f"{doubled} doubled, {disordered} out of order."
                    + (" Every exchange applied exactly once, in order." if once else "")
                )
    finally:
        stop.set()
        await consumer.stop()
        for worker in workers:
            worker.stop()
        if api is not None:
            api.stop()
    report(samples, rate)
    budget.report(samples.produced)


def report(samples: Samples, rate: int) -> None:
    print(f"\nworker SIGKILLed {len(samples.kills)} times, at {', '.join(f'{t:.0f}s' for t in samples.kills)}")
    print(f"lag over {len(samples.at)} samples (records on the threads topic not yet applied), p50 / p99 / max:")
    for name, values in samples.lag.items():
        p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
        print(
            f"  {name:16} {p50:10,.0f} / {p99:10,.0f} / {max(values):10,} records"
            f"   (p99 = {p99 / (3 * rate):.1f}s of production)"
        )
    print("worker RSS over time (MB), per minute; 0 while it restarts:")
    by_minute: dict[int, list[float]] = {}
    for at, rss in zip(samples.at, samples.rss_mb, strict=True):
        by_minute.setdefault(int(at // 60), []).append(rss)
    for minute, sizes in sorted(by_minute.items()):
        live = [v for v in sizes if v > 0]
        if live:
            middle = statistics.median(live)
            print(f"  minute {minute:3d}: min {min(live):6.0f}  median {middle:6.0f}  max {max(live):6.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=500, help="exchanges a second (default 500)")
    parser.add_argument("--minutes", type=float, default=30.0, help="how long to produce (default 30)")
    parser.add_argument("--kill-every", type=float, default=5.0, help="minutes between worker kills (default 5)")
    parser.add_argument("--sample-seconds", type=float, default=2.0, help="lag and memory sampling interval")
    parser.add_argument("--dynamic", action="store_true", help="restart the worker as a new group member")
    parser.add_argument("--split", action="store_true", help="two workers: sessions and facts; the rest")
    parser.add_argument(
        "--via", choices=("producer", "http"), default="producer", help="record with the library producer or POSTs"
    )
    args = parser.parse_args()
    stack = Settings()
    local = LocalStack(stack)
    started = local.up()
    try:
        settings = isolated(
            stack,
            fold_agent=False,
            mongo_database="memlogsoak",
            worker_instance=None if args.dynamic else "soak",
            api_port=free_port(),
        )
        print("worker restarted as " + ("a new member" if args.dynamic else "the static member 'soak'"))
        if args.split:
            print("two workers: " + "; ".join(SPLIT) + " (RSS is their sum)")
        services = local_pids(local)
        if args.via == "http":
            print("exchanges POSTed to an API of the soak's own, its CPU counted")
        asyncio.run(
            soak(
                settings,
                args.rate,
                args.minutes,
                args.kill_every,
                args.sample_seconds,
                services,
                args.split,
                args.via == "http",
            )
        )
    finally:
        local.down(started)


if __name__ == "__main__":
    main()
