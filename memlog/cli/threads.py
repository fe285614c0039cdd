"""`memlog threads ...`, `memlog retention ...` and `memlog reset`: the thread operations straight on the log."""

from __future__ import annotations

import argparse
import json

from memlog.app.conversations import conversation_ref
from memlog.config.settings import Settings
from memlog.services import CLI_PRODUCER, open_services
from schemas.errors import InvalidEvent
from schemas.events import now_ms


def _flag(value: str | None) -> bool | None:
    return None if value is None else value == "true"


async def run_threads(settings: Settings, args: argparse.Namespace) -> str:
    ref = conversation_ref(args.tenant, args.thread, args.conversation)
    async with open_services(settings, producer=True, producer_name=CLI_PRODUCER) as services:
        conversations = services.threads()
        if args.action == "list":
            metas = await services.conversations.conversations(ref.tenant, ref.thread, ref.owner)
            return json.dumps([m.view() for m in metas], indent=1)
        if args.action in ("rename", "fork") and not args.target:
            raise InvalidEvent("target", f"{args.action} needs --target")
        if args.action == "compact":
            position = await conversations.compact(ref)
        elif args.action == "reset":
            position = await conversations.reset(ref, args.reason)
        elif args.action == "rename":
            position = await conversations.rename(ref, args.target)
        elif args.action == "fork":
            position = await conversations.fork(ref, args.target)
        elif args.action == "archive":
            position = await conversations.archive(
                ref, archived=_flag(args.archived), protected=_flag(args.protected), kind=args.kind
            )
        else:
            position = await conversations.purge(ref, args.reason)
    return f"{args.action} {args.thread} {ref.conversation}: {position.token()}"


async def run_retention(settings: Settings, args: argparse.Namespace) -> str:
    async with open_services(settings, producer=args.confirm, producer_name=CLI_PRODUCER) as services:
        report = await services.threads(read_only=not args.confirm).retention(
            args.tenant,
            settings.retention_policy(),
            args.now if args.now is not None else now_ms(),
            confirm=args.confirm,
        )
    return json.dumps(report, indent=1)


async def reset_session(settings: Settings, tenant: str, subject: str, reason: str) -> str:
    async with open_services(settings, producer=True, producer_name=CLI_PRODUCER) as services:
        return (await services.threads().reset_session(tenant, subject, reason)).token()
