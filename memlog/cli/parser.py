"""The `memlog` command line: every command, its arguments and its help."""

from __future__ import annotations

import argparse
import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from memlog.cli.schemas import LEVELS
from memlog.config.settings import MAX_REPLAY_WORKERS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memlog", description="Event-sourced memory for AI agent backends.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG")
    _through_the_api(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="run everything: the local stack where nothing is configured, worker, API")
    commands.add_parser("worker", help="run the Faust worker (all projection agents)")
    commands.add_parser("api", help="run the HTTP API")
    dev = commands.add_parser("dev", help="the local stack: Kafka, Redis, a MongoDB wire-protocol server")
    dev.add_argument("action", choices=["up", "down", "status"])
    dev.add_argument(
        "what",
        nargs="?",
        choices=["stack", "redis-cluster", "kafka-cluster"],
        default="stack",
        help="redis-cluster: a local 3-master Redis Cluster for MEMLOG_REDIS_CLUSTER=true; kafka-cluster: "
        "a local 3-broker KRaft cluster for replicated topics (default: the stack)",
    )
    _schemas(commands)
    topics = commands.add_parser("topics", help="create memlog's topics")
    topics.add_argument("action", choices=["create"])
    facts = commands.add_parser("facts", help="a subject's lasting facts: list, add, edit, rm, clear")
    facts.add_argument("action", choices=["list", "add", "edit", "rm", "clear"])
    facts.add_argument("tenant")
    facts.add_argument("subject")
    facts.add_argument("rest", nargs="*", help="add: TEXT; edit: FACT_ID TEXT; rm: FACT_ID")
    facts.add_argument("--scope", choices=["agent", "shared"], default="shared")
    facts.add_argument("--agent", default=None)
    mcp = commands.add_parser(
        "mcp", help="the agent's memory tools over MCP on stdio (with --api: a bridge to the API's MCP endpoint)"
    )
    mcp.add_argument("--agent", required=True, help="the agent these tools act for")
    mcp.add_argument("--tenant", default=None, help="with --api: the tenant the session is bound to")
    mcp.add_argument("--subject", default=None, help="with --api: the subject the session is bound to")
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
        "--status", default=None, metavar="REPLAY_ID", help="with --api: how a replay started by the API stands"
    )
    replay.add_argument(
        "--workers",
        type=processes,
        default=None,
        help="processes sharing the partitions, 1 to 64 (default: MEMLOG_REPLAY_WORKERS)",
    )
    verify = commands.add_parser("verify", help="compare two namespaces and list every difference")
    verify.add_argument("left", nargs="?", default=None, help="default: the namespace reads use now")
    verify.add_argument("right", nargs="?", default=None, help="default: the one reads used before the last replay")
    namespaces = commands.add_parser("namespaces", help="the namespaces replays built: list them, drop one")
    namespaces.add_argument("action", choices=["list", "drop"])
    namespaces.add_argument("name", nargs="?", default=None, help="drop: the namespace (never the active one)")
    commands.add_parser(
        "compact", help="rewrite MongoDB's and Redis's files, so what erasures deleted is gone from disk too"
    )
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


def _through_the_api(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"memlog {installed_version()}")
    parser.add_argument(
        "--api",
        default=None,
        metavar="URL",
        help="an operator's commands (erase, export, ledger, facts, threads, retention, replay) and mcp go "
        "through this deployment's HTTP API with a token, never with the stores or the master key",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("MEMLOG_API_TOKEN"),
        help="with --api: an operator's (or a backend's) token (default: MEMLOG_API_TOKEN)",
    )
    parser.add_argument("--json", action="store_true", help="print what the command prints as JSON")


def _schemas(commands: Any) -> None:
    schemas = commands.add_parser(
        "schemas", help="register every event type's schema in the registry, with a compatibility level"
    )
    schemas.add_argument("action", choices=["register"])
    schemas.add_argument("--compatibility", choices=LEVELS, default="BACKWARD", help="default: BACKWARD")
    schemas.add_argument(
        "--url", default=None, help="the registry's Confluent-compatible API (default: MEMLOG_SCHEMA_REGISTRY_URL)"
    )


def processes(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= count <= MAX_REPLAY_WORKERS:
        raise argparse.ArgumentTypeError(f"{count} processes: choose from 1 to {MAX_REPLAY_WORKERS}")
    return count


def installed_version() -> str:
    try:
        return version("memlog")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"
