"""The `memlog` command: `up`, `worker`, `api`, `dev up | down | status`, `threads`, `retention`, ..."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

import httpx

from config.settings import MAX_REPLAY_WORKERS, Settings
from memlog.localstack import LocalStack
from schemas.errors import InvalidEvent, MemlogError

log = logging.getLogger("memlog")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memlog", description="Event-sourced memory for AI agent backends.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="run everything: the local stack where nothing is configured, worker, API")
    commands.add_parser("worker", help="run the Faust worker (all projection agents)")
    commands.add_parser("api", help="run the HTTP API")
    dev = commands.add_parser("dev", help="the local stack: Kafka, Redis, a MongoDB wire-protocol server")
    dev.add_argument("action", choices=["up", "down", "status"])
    topics = commands.add_parser("topics", help="create memlog's topics")
    topics.add_argument("action", choices=["create"])
    facts = commands.add_parser("facts", help="a subject's lasting facts: list, add, edit, rm, clear")
    facts.add_argument("action", choices=["list", "add", "edit", "rm", "clear"])
    facts.add_argument("tenant")
    facts.add_argument("subject")
    facts.add_argument("rest", nargs="*", help="add: TEXT; edit: FACT_ID TEXT; rm: FACT_ID")
    facts.add_argument("--scope", choices=["agent", "shared"], default="shared")
    facts.add_argument("--agent", default=None)
    mcp = commands.add_parser("mcp", help="serve the agent's memory tools over MCP (stdio)")
    mcp.add_argument("--agent", required=True, help="the agent these tools act for")
    reset = commands.add_parser("reset", help="start a new session for a subject (memories stay)")
    reset.add_argument("tenant")
    reset.add_argument("subject")
    reset.add_argument("--reason", default="memlog reset")
    erase = commands.add_parser("erase", help="erase everything memlog holds about a subject (operator)")
    erase.add_argument("tenant")
    erase.add_argument("subject")
    erase.add_argument("--reason", default=None, help="kept in the log; no personal data here")
    export = commands.add_parser("export", help="one JSON bundle of everything memlog holds about a subject")
    export.add_argument("tenant")
    export.add_argument("subject")
    export.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    replay = commands.add_parser("replay", help="rebuild projections from the topics into a fresh namespace")
    replay.add_argument("--projection", choices=["sessions", "facts", "traces", "archives", "all"], default="all")
    replay.add_argument("--from", dest="since", default=None, help="ISO time to start from (default: the beginning)")
    replay.add_argument("--no-switch", action="store_true", help="build it, but keep reads where they are")
    replay.add_argument(
        "--workers",
        type=_processes,
        default=None,
        help="processes sharing the partitions, 1 to 64 (default: MEMLOG_REPLAY_WORKERS)",
    )
    verify = commands.add_parser("verify", help="compare two namespaces and list every difference")
    verify.add_argument("left", nargs="?", default=None, help="default: the namespace reads use now")
    verify.add_argument("right", nargs="?", default=None, help="default: the one reads used before the last replay")
    demo = commands.add_parser("demo", help="a scripted tour of a running memlog (after `memlog up`)")
    demo.add_argument("--url", default=None, help="the API (default: MEMLOG_API_HOST and MEMLOG_API_PORT)")
    ledger = commands.add_parser("ledger", help="operator requests and what they did")
    ledger.add_argument("tenant", nargs="?", default=None)
    ledger.add_argument("subject", nargs="?", default=None)
    threads = commands.add_parser("threads", help="a thread's conversations: list, compact, reset, rename, fork, ...")
    threads.add_argument("action", choices=["list", "compact", "reset", "rename", "fork", "archive", "purge"])
    threads.add_argument("tenant")
    threads.add_argument("thread", help="session:<subject>, public or automation:<agent>")
    threads.add_argument("conversation", nargs="?", default="main", help="default: main, the current one")
    threads.add_argument("--target", help="rename / fork: the new conversation's name")
    threads.add_argument("--reason", default=None)
    threads.add_argument("--archived", choices=["true", "false"], default=None)
    threads.add_argument("--protected", choices=["true", "false"], default=None)
    threads.add_argument("--kind", choices=["main", "task", "subagent"], default=None)
    retention = commands.add_parser("retention", help="conversation retention: a dry run unless --confirm")
    retention.add_argument("tenant")
    retention.add_argument("--confirm", action="store_true", help="delete the targets (each re-checked first)")
    retention.add_argument("--now", type=int, default=None, help="epoch ms to plan against; default: now")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = Settings()
    try:
        if args.command == "dev":
            return _dev(settings, args.action)
        if args.command == "topics":
            from streams.topics import ensure_topics

            created = asyncio.run(ensure_topics(settings))
            print(f"created: {', '.join(created) or 'none (all exist)'}")
            return 0
        if args.command == "worker":
            from streams.worker import run_worker

            run_worker(settings)
            return 0
        if args.command == "api":
            return _api(settings)
        if args.command == "mcp":
            from memlog.mcp_server import run_mcp

            logging.getLogger().handlers.clear()  # stdout carries the protocol; logs go to stderr only
            logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
            run_mcp(settings, args.agent)
            return 0
        if args.command == "facts":
            for line in asyncio.run(_facts(settings, args)):
                print(line)
            return 0
        if args.command in ("threads", "retention"):
            from memlog.conversations_cli import run_retention, run_threads

            print(
                asyncio.run(run_threads(settings, args) if args.command == "threads" else run_retention(settings, args))
            )
            return 0
        if args.command == "reset":
            position = asyncio.run(_reset(settings, args.tenant, args.subject, args.reason))
            print(f"new session for {args.subject} in {args.tenant}: {position}")
            return 0
        if args.command == "demo":
            from memlog.demo import run_demo

            logging.getLogger("httpx").setLevel(logging.WARNING)
            asyncio.run(run_demo(settings, args.url))
            return 0
        if args.command in ("erase", "export", "replay", "verify", "ledger"):
            from memlog.operator import run_operator_command

            return asyncio.run(run_operator_command(settings, args))
        return _up(settings)
    except MemlogError as exc:
        print(f"memlog: {exc}", file=sys.stderr)
        return 1


def _processes(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= count <= MAX_REPLAY_WORKERS:
        raise argparse.ArgumentTypeError(f"{count} processes: choose from 1 to {MAX_REPLAY_WORKERS}")
    return count


def _dev(settings: Settings, action: str) -> int:
    stack = LocalStack(settings)
    if action == "up":
        started = stack.up()
        print(f"started: {', '.join(started) or 'nothing (all running)'}")
    elif action == "down":
        stopped = stack.down()
        print(f"stopped: {', '.join(stopped) or 'nothing memlog had started'}")
    for status in stack.status():
        state = "up" if status.up else "down"
        owner = f"pid {status.pid}" if status.managed else status.detail
        print(f"{status.name:6} {state:5} {status.endpoint:28} {owner}")
    return 0


async def _reset(settings: Settings, tenant: str, subject: str, reason: str) -> str:
    from memlog.services import CLI_PRODUCER, open_services

    async with open_services(settings, producer=True, producer_name=CLI_PRODUCER) as services:
        return (await services.threads().reset_session(tenant, subject, reason)).token()


async def _facts(settings: Settings, args: argparse.Namespace) -> list[str]:
    """The subject's own commands (seed 000 "/allay memory", "/allay forget"), straight on the log."""
    from memlog.services import CLI_PRODUCER, open_services

    async with open_services(settings, producer=True, producer_name=CLI_PRODUCER) as services:
        memory = services.memory
        rest = list(args.rest)
        if args.action == "list":
            return [
                f"{f.fact_id}  [{f.scope}{'/' + f.agent if f.agent else ''}]  {f.text}"
                for f in await memory.facts(args.tenant, args.subject, args.agent)
            ]
        if args.action == "add":
            if not rest:
                raise InvalidEvent("text", "add needs the fact's text")
            fact_id, position = await memory.remember(
                args.tenant, args.subject, " ".join(rest), agent=args.agent, scope=args.scope, source="subject"
            )
            return [f"remembered {fact_id} ({position.token()})"]
        if args.action == "edit":
            if len(rest) < 2:
                raise InvalidEvent("text", "edit needs FACT_ID and the new text")
            position = await memory.revise(args.tenant, args.subject, rest[0], " ".join(rest[1:]), None)
            return [f"revised {rest[0]} ({position.token()})"]
        if args.action == "rm":
            if len(rest) != 1:
                raise InvalidEvent("fact_id", "rm needs one FACT_ID")
            return [f"forgot {rest[0]} ({(await memory.forget(args.tenant, args.subject, rest[0], None)).token()})"]
        return [f"forgot every fact ({(await memory.clear(args.tenant, args.subject)).token()})"]


def _api(settings: Settings) -> int:
    import uvicorn

    from memlog.api import create_api

    uvicorn.run(
        create_api(settings), host=settings.api_host, port=settings.api_port, log_level="info", access_log=False
    )
    return 0


def _up(settings: Settings) -> int:
    """The main job: local stack, worker and API; Ctrl-C stops everything this started."""
    stack = LocalStack(settings)
    started = stack.up()
    children: dict[str, subprocess.Popen[bytes]] = {}
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        from streams.topics import ensure_topics

        asyncio.run(ensure_topics(settings))
        for part in ("worker", "api"):
            children[part] = subprocess.Popen([sys.executable, "-m", "memlog", part], env=os.environ.copy())
        url = f"http://{settings.api_host}:{settings.api_port}"
        _wait_healthy(url, list(children.values()))
        print(f"memlog is up: API on {url} (OpenAPI at {url}/docs). Ctrl-C stops it.", flush=True)
        while not stopping:
            for part, child in children.items():
                if child.poll() is not None:
                    print(f"memlog: the {part} process exited with {child.returncode}", file=sys.stderr)
                    stopping = True
            time.sleep(0.5)
    finally:
        for child in children.values():
            if child.poll() is None:
                child.terminate()
        for child in children.values():
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
        stack.down(started)
    return 0


def _wait_healthy(url: str, children: list[subprocess.Popen[bytes]], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(child.poll() is not None for child in children):
            raise MemlogError("a memlog process exited during start-up; see the log above")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise MemlogError(f"the API did not answer on {url} within {timeout:.0f}s")
