"""The `memlog` command: `up`, `worker`, `api`, `dev up | down | status`, `threads`, `retention`, ...

One module per area: `parser` (the command line), `stack` (dev, up, api), `facts`, `threads`
(threads, retention, reset), `namespaces` and `operators` (erase, export, replay, verify, ledger, compact).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence

from memlog.cli.parser import build_parser
from memlog.cli.remote import NOT_APPLIED, REFUSED, UNAVAILABLE
from memlog.cli.stack import api, dev, up
from memlog.config.settings import Settings
from schemas.errors import LogUnavailable, MemlogError, NotCaughtUp, StoreUnavailable


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.api:
        from memlog.cli.remote import run_remote

        return run_remote(args)
    settings = Settings()
    try:
        if args.command == "dev":
            return dev(settings, args.action, args.what)
        if args.command == "topics":
            from streams.topics import ensure_topics

            created = asyncio.run(ensure_topics(settings))
            print(f"created: {', '.join(created) or 'none (all exist)'}")
            return 0
        if args.command == "schemas":
            from memlog.cli.schemas import register_schemas

            registered = register_schemas(settings, args)
            for name, schema_id in registered:
                print(f"{name}: id {schema_id}, {args.compatibility}")
            return 0
        if args.command == "worker":
            from memlog.services import open_backends
            from streams.worker import run_worker

            run_worker(settings, open_backends)
            return 0
        if args.command == "api":
            return api(settings)
        if args.command == "mcp":
            from memlog.mcp.server import run_mcp

            logging.getLogger().handlers.clear()  # stdout carries the protocol; logs go to stderr only
            logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
            run_mcp(settings, args.agent)
            return 0
        if args.command == "facts":
            from memlog.cli.facts import run_facts

            for line in asyncio.run(run_facts(settings, args)):
                print(line)
            return 0
        if args.command in ("threads", "retention"):
            from memlog.cli.threads import run_retention, run_threads

            print(
                asyncio.run(run_threads(settings, args) if args.command == "threads" else run_retention(settings, args))
            )
            return 0
        if args.command == "namespaces":
            from memlog.cli.namespaces import run_namespaces

            for line in asyncio.run(run_namespaces(settings, args)):
                print(line)
            return 0
        if args.command == "reset":
            from memlog.cli.threads import reset_session

            position = asyncio.run(reset_session(settings, args.tenant, args.subject, args.reason))
            print(f"new session for {args.subject} in {args.tenant}: {position}")
            return 0
        if args.command == "demo":
            from memlog.dev.demo import run_demo

            logging.getLogger("httpx").setLevel(logging.WARNING)
            asyncio.run(run_demo(settings, args.url))
            return 0
        if args.command in ("erase", "export", "replay", "verify", "ledger", "compact"):
            from memlog.cli.operators import run_operator_command

            return asyncio.run(run_operator_command(settings, args))
        return up(settings)
    except MemlogError as exc:
        print(f"memlog: {exc}", file=sys.stderr)
        return exit_code(exc)


def exit_code(exc: MemlogError) -> int:
    """The exit code of a failure (README "Exit codes"): 3 a service away, 4 not applied in time, 1 refused."""
    if isinstance(exc, NotCaughtUp):
        return NOT_APPLIED
    if isinstance(exc, LogUnavailable | StoreUnavailable):
        return UNAVAILABLE
    return REFUSED
