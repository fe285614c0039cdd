"""A projector's dead-letter side in tests: the letters it sent, and a counter that keeps nothing."""

from __future__ import annotations


class Letters:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, key: bytes | None, value: bytes) -> None:
        self.sent.append(value)


class Counted:
    async def count_dead_letter(self, topic: str) -> None:
        pass
