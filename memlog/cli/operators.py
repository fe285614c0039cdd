"""The operator's commands: erase, export, replay, verify, ledger. Each request is logged in the ledger."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, BinaryIO

from memlog.app.privacy import Requested
from memlog.app.replays import projections_named
from memlog.cli.remote import DIFFERENCES
from memlog.config.settings import Settings
from memlog.services import CLI_PRODUCER, open_backends, open_services
from schemas.errors import InvalidEvent, NotCaughtUp

CLI_OPERATOR = "cli"
CLI_WAIT_SECONDS = 120.0  # how long erase and export wait for the worker to apply them


async def run_operator_command(settings: Settings, args: argparse.Namespace) -> int:
    if args.command == "replay":
        return await _replay(settings, args)
    if args.command == "verify":
        return await _verify(settings, args)
    if args.command == "compact":
        for line in await compact_storage(settings):
            print(line)
        return 0
    async with open_services(
        settings, producer=args.command in ("erase", "export"), producer_name=CLI_PRODUCER
    ) as services:
        await services.follow_pointer()
        if args.command == "ledger":
            entries = await services.ledger.entries(tenant=args.tenant, subject=args.subject)
            if args.json:
                print(json.dumps(entries, default=str))
                return 0
            for entry in entries:
                at = entry.pop("at")
                print(f"{at.isoformat()}  {entry.pop('kind'):16} {json.dumps(entry, default=str, sort_keys=True)}")
            return 0
        requests = services.subject_requests
        if args.command == "erase":
            erased = _applied(
                await requests.erase(
                    args.tenant, args.subject, requested_by=CLI_OPERATOR, reason=args.reason, wait=CLI_WAIT_SECONDS
                )
            )
            deleted = erased.ledger.get("deleted", {}) if erased.ledger else {}
            if args.json:
                shown = {"request_id": erased.request_id, "position": erased.position.token(), "done": True}
                print(json.dumps({**shown, "ledger": erased.ledger}, default=str))
                return 0
            print(f"erased {args.subject} of {args.tenant} (request {erased.request_id}): {json.dumps(deleted)}")
            return 0
        export = _applied(
            await requests.export(args.tenant, args.subject, requested_by=CLI_OPERATOR, wait=CLI_WAIT_SECONDS)
        )
        assert export.bundle is not None, "an applied export comes with its bundle"
        if args.output == "-":
            await _write_bundle(export.bundle, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            with Path(args.output).open("wb") as out:  # noqa: ASYNC230
                await _write_bundle(export.bundle, out)
            print(f"wrote the bundle of {args.subject} to {args.output}", file=sys.stderr)
        return 0


async def _write_bundle(parts: AsyncIterator[bytes], out: BinaryIO) -> None:
    """The bundle part after part (it has no size limit), then a newline."""
    async for part in parts:
        out.write(part)
    out.write(b"\n")


async def compact_storage(settings: Settings) -> list[str]:
    """After erasures: the privacy database (the deleted data keys) and the database of every namespace of
    this app the registry holds are compacted, and Redis rewrites its files (docs/operators/erasure.md, "What an erasure
    removes")."""
    from streams import compaction

    backends = open_backends(settings)
    try:
        privacy = backends.shared
        started = dt.datetime.now(dt.UTC)
        lines = await compaction.compact_storage(settings, backends.mongo, backends.redis, privacy.namespaces)
        await privacy.ledger.record(compaction.COMPACTED, covers_until=started, done=lines, by="operator")
        return lines
    finally:
        await backends.close()


def _applied(requested: Requested) -> Requested:
    """Erase and export print what the worker did, so they fail when it has not done it within the wait."""
    if not requested.done:
        position, waited = requested.position.token(), f"{CLI_WAIT_SECONDS:.0f}s"
        raise NotCaughtUp(f"no worker applied {position} within {waited}; is `memlog worker` running?")
    return requested


def _since(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidEvent("--from", f"{text!r} is not an ISO time such as 2026-11-29T12:00:00+00:00") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


async def _replay(settings: Settings, args: argparse.Namespace) -> int:
    from streams.replay import replay

    report = await replay(
        settings,
        projections_named(args.projection),
        open_backends=open_backends,
        since_ms=_since(args.since),
        switch=not args.no_switch,
        workers=args.workers,
    )
    print(
        f"replayed {report.events:,} events into {report.namespace} in {report.seconds:.1f}s "
        f"({report.rate:,.0f} events/s); dead letters seen again: {report.dead_letters}"
    )
    print(f"rebuilt: {', '.join(report.projections)}")
    if report.erased_meanwhile:
        print(f"erased from it {report.erased_meanwhile} subjects whose erasure arrived while it was being built")
    for (tenant, subject), count in sorted(report.skipped.items()):
        print(f"skipped {count} events of an erased subject in {tenant}: {report.reasons[(tenant, subject)]}")
    if report.expired:
        expired = sum(report.expired.values())
        print(f"skipped {expired} events of {len(report.expired)} subjects whose period keys were shredded on schedule")
    print(f"reads now use {report.namespace}" if report.switched else f"reads still use {report.previous}")
    return 0


async def _verify(settings: Settings, args: argparse.Namespace) -> int:
    from memlog.verify import MAX_SHOWN, verify

    left, right = args.left, args.right
    if left is None or right is None:
        async with open_services(settings) as services:
            doc: dict[str, Any] | None = await services.privacy["namespaces"].find_one({"_id": settings.app_id})
        if doc is None:
            raise InvalidEvent("namespaces", "no replay has switched namespaces yet; name the two to compare")
        left, right = left or str(doc.get("previous")), right or str(doc["namespace"])
    backends = open_backends(settings)
    try:
        differences = await verify(backends, left, right)
    finally:
        await backends.close()
    for difference in differences[:MAX_SHOWN]:
        print(difference)
    if len(differences) > MAX_SHOWN:
        print(f"... and {len(differences) - MAX_SHOWN} more")
    print(f"{left} and {right}: " + ("identical" if not differences else f"{len(differences)} differences"))
    return 0 if not differences else DIFFERENCES
