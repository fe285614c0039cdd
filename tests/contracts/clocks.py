"""A clock the test moves, for the stores that date what they keep by the wall clock."""

from __future__ import annotations

import datetime as dt


class Clock:
    """Starts at the real time, so a server's TTL monitor leaves what the test writes alone.

    Whole seconds: MongoDB keeps dates to the millisecond, so what is read back equals what was set.
    """

    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.UTC).replace(microsecond=0)

    def __call__(self) -> dt.datetime:
        return self.now

    def move(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)
