"""The replay lease (DESIGN, "One replay at a time"): one document per app id in the shared privacy
database, `replay_lease`, naming the replay that holds it and until when.

A replay from the API or the CLI takes it before it writes anything and renews it with its heartbeat
(every 30 s); a lease not renewed for LEASE_SECONDS (its holder died) is taken over. Taking it is one conditional
upsert: the filter matches the document only when it is free, expired or already the holder's, and
an upsert that matches nothing meets the `_id` of the held one (a duplicate key): refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from memlog.adapters.mongo_store import mongo_errors
from schemas.errors import Conflict

LEASE_SECONDS = 120.0  # four of the replay's heartbeats (projections/namespaces.py)


def _now_ms() -> int:
    return int(time.time() * 1000)


class MongoReplayLease:
    def __init__(self, privacy: AsyncDatabase[dict[str, Any]], app_id: str, clock: Callable[[], int] = _now_ms) -> None:
        self._leases = privacy["replay_lease"]
        self._app_id = app_id
        self._clock = clock

    async def take(self, holder: str, note: str = "") -> None:
        """Hold the lease (or renew it for its holder); Conflict while another replay holds it."""
        now = self._clock()
        free = {"_id": self._app_id, "$or": [{"holder": holder}, {"until": {"$lt": now}}]}
        held = {"holder": holder, "until": now + int(LEASE_SECONDS * 1000), **({"note": note} if note else {})}
        with mongo_errors():
            try:
                await self._leases.update_one(free, {"$set": held}, upsert=True)
                return
            except DuplicateKeyError:
                other = await self._leases.find_one({"_id": self._app_id}) or {}
        raise Conflict(f"a replay is running already ({other.get('note') or other.get('holder')}); one at a time")

    async def release(self, holder: str) -> None:
        with mongo_errors():
            await self._leases.delete_one({"_id": self._app_id, "holder": holder})

    async def holder(self) -> str | None:
        """Who holds the lease now; None when it is free or expired."""
        with mongo_errors():
            doc = await self._leases.find_one({"_id": self._app_id})
        return None if doc is None or int(doc.get("until", 0)) < self._clock() else str(doc["holder"])
