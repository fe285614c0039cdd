"""Log positions and the tokens a write returns for read-your-writes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from schemas.errors import InvalidEvent
from schemas.frozen import quick

PARTITION = r"\d{1,6}"
OFFSET = r"\d{1,19}"
_TOKEN = re.compile(rf"^(?P<topic>[a-z]+)\.(?P<partition>{PARTITION})\.(?P<offset>{OFFSET})$")


def token_pattern(topics: Iterable[str]) -> str:
    """The form of a token of one of `topics`, as a description states it (`Position.parse` checks)."""
    return rf"^({'|'.join(topics)})\.{PARTITION}\.{OFFSET}$"


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
