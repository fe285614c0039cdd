"""`memlog namespaces list | drop NAME`: the app's namespaces, and dropping one out of use."""

from __future__ import annotations

import argparse
import datetime as dt

from memlog.config.settings import Settings
from memlog.services import open_services
from projections.namespaces import drop_after
from schemas.errors import InvalidEvent


def _when(moment: dt.datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


async def run_namespaces(settings: Settings, args: argparse.Namespace) -> list[str]:
    async with open_services(settings) as services:
        namespaces = services.namespaces
        if args.action == "drop":
            if args.name is None:
                raise InvalidEvent("name", "name the namespace to drop (`memlog namespaces list` shows them)")
            entry = await namespaces.drop(args.name)
            return [f"dropped {entry.namespace} ({entry.state}): its MongoDB database and Redis keys are gone"]
        entries = await namespaces.entries()
        lines = [f"{'NAMESPACE':<28} {'STATE':<10} {'SINCE':<20} {'DROPPED FROM':<20} NOTE"]
        for entry in entries:
            after = drop_after(entry, namespaces.grace)
            lines.append(
                f"{entry.namespace:<28} {entry.state:<10} {_when(entry.since):<20} {_when(after):<20} {entry.note}"
            )
        return lines
