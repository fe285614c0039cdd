"""`memlog facts ...`: a subject's lasting facts, straight on the log."""

from __future__ import annotations

import argparse
import json

from memlog.config.settings import Settings
from memlog.services import CLI_PRODUCER, open_services
from schemas.errors import InvalidEvent


async def run_facts(settings: Settings, args: argparse.Namespace) -> list[str]:
    """The subject's own commands (seed 000 "/allay memory", "/allay forget"), straight on the log."""
    async with open_services(settings, producer=True, producer_name=CLI_PRODUCER) as services:
        memory = services.memory
        rest = list(args.rest)
        if args.action == "list":
            if args.json:
                return [json.dumps([f.view() for f in await memory.facts(args.tenant, args.subject, args.agent)])]
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
