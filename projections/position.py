"""Log positions and the tokens a write returns for read-your-writes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.errors import InvalidEvent
from schemas.frozen import quick

_TOKEN = re.compile(r"^(?P<topic>[a-z]+)\.(?P<partition>\d{1,6})\.(?P<offset>\d{1,19})$")


@quick
@dataclass(frozen=True, order=True)
class Position:
    """Where a record sits in a topic. `topic` is the short name (threads, facts, ...)."""

    topic: str
    partition: int
    offset: int

    def token(self) -> str:
        return f"{self.topic}.{self.partition}.{self.offset}"

    @classmethod
    def parse(cls, token: str) -> Position:
        match = _TOKEN.match(token)
        if match is None:
            raise InvalidEvent("after", f"{token!r} is not a position token like 'threads.3.1200'")
        return cls(match["topic"], int(match["partition"]), int(match["offset"]))
