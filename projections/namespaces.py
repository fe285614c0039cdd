"""The life cycle of namespaces, the pure part: their states, and which may be dropped when.

A namespace (a Redis key prefix and a MongoDB database) is written by a worker or a replay. Every one
is recorded in the namespace registry, so an erasure can reach it and an operator can see and drop it:

- `building`: a replay is writing into it (it says so every HEARTBEAT_SECONDS);
- `active`: reads and workers use it (the namespace pointer names it);
- `previous`: it was active until a replay switched away from it;
- `abandoned`: a replay built it and did not switch to it (`--no-switch`), or failed.

A namespace that is not active is dropped once `grace` has passed since it stopped being active (or
since its replay ended); a `building` one only once its replay has not been heard of for that long.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

BUILDING = "building"
ACTIVE = "active"
PREVIOUS = "previous"
ABANDONED = "abandoned"
STATES = (BUILDING, ACTIVE, PREVIOUS, ABANDONED)

# A replay says it is alive this often; one unheard of for STALE_SECONDS has stopped (a crash leaves
# its namespace `building`), so an operator may drop it, and the grace period never ends before.
HEARTBEAT_SECONDS = 30.0
STALE_SECONDS = 120.0

# Letters, digits, '-' and '_': a namespace is a Redis key prefix component (SCANned by prefix when it
# is dropped, so no ':' or glob character) and part of a MongoDB database name (under 64 bytes). The
# configured one is at most 32 (memlog.config.settings), so a replay's `<namespace>-r<14 digits>` fits.
NAME = re.compile(r"[A-Za-z0-9_-]{1,48}")


def valid_name(namespace: str) -> bool:
    return NAME.fullmatch(namespace) is not None


@dataclass(frozen=True)
class NamespaceEntry:
    """One namespace as the registry holds it.

    `since` is when it entered its state; `retired_at` when it stopped being active or its replay
    ended (None while active or building); `seen_at` the last sign of life of its replay.
    """

    namespace: str
    state: str
    created_at: dt.datetime
    since: dt.datetime
    retired_at: dt.datetime | None = None
    seen_at: dt.datetime | None = None
    note: str = ""


def why_not_drop(entry: NamespaceEntry, active: str, now: dt.datetime) -> str | None:
    """Why an operator may not drop this namespace now; None when it may go."""
    if entry.namespace == active or entry.state == ACTIVE:
        return f"{entry.namespace} is the active namespace: reads and workers use it"
    if entry.state == BUILDING:
        heard = entry.seen_at or entry.since
        ago = (now - heard).total_seconds()
        if ago < STALE_SECONDS:
            return f"a replay is building {entry.namespace} (heard of {ago:.0f}s ago); let it finish first"
    return None


def drop_after(entry: NamespaceEntry, grace: dt.timedelta) -> dt.datetime | None:
    """When the worker may drop this namespace (unless it is the active one by then); None while active."""
    if entry.state == ACTIVE:
        return None
    if entry.state == BUILDING:
        return (entry.seen_at or entry.since) + max(grace, dt.timedelta(seconds=STALE_SECONDS))
    return (entry.retired_at or entry.since) + grace


def due_for_drop(entry: NamespaceEntry, active: str, now: dt.datetime, grace: dt.timedelta) -> bool:
    """Whether the worker drops this namespace now: not active, and out of use for `grace`."""
    if why_not_drop(entry, active, now) is not None:
        return False
    after = drop_after(entry, grace)
    return after is not None and now >= after
