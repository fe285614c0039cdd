"""The Exports contract, run against every implementation.

The contract suite; the test module test_exports.py runs it against each adapter."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import AsyncIterator, Iterable

from projections.ports import Exports

PART = 1000  # the part size the suite stores with, so a few kilobytes take several parts


async def chunks(*pieces: bytes) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


async def read(exports: Exports, request_id: str) -> bytes:
    return b"".join([part async for part in exports.read(request_id)])


class ExportsContract:
    async def test_a_stored_bundle_reads_back(self, exports: Exports) -> None:
        size = await exports.put("r1", "castle", "ann", chunks(b'{"facts": ', b'["one"]}'))
        stored = await exports.get("r1")
        assert stored is not None and size == stored["size"] == 18
        assert (stored["tenant"], stored["subject"]) == ("castle", "ann")
        assert isinstance(stored["created_at"], dt.datetime) and stored["created_at"].tzinfo is not None
        assert await read(exports, "r1") == b'{"facts": ["one"]}'
        assert await exports.get("r2") is None and await read(exports, "r2") == b""

    async def test_a_bundle_of_many_parts_reads_back_whole_in_order(self, exports: Exports) -> None:
        body = os.urandom(7 * PART + 123)
        pieces: Iterable[bytes] = [body[start : start + 777] for start in range(0, len(body), 777)]
        assert await exports.put("r1", "castle", "ann", chunks(*pieces)) == len(body)
        parts = [part async for part in exports.read("r1")]
        assert len(parts) == 8 and all(len(part) <= PART for part in parts)
        assert b"".join(parts) == body

    async def test_an_empty_bundle_is_stored_too(self, exports: Exports) -> None:
        assert await exports.put("r1", "castle", "ann", chunks()) == 0
        assert await exports.get("r1") is not None and await read(exports, "r1") == b""

    async def test_a_bundle_put_again_replaces_the_first(self, exports: Exports) -> None:
        await exports.put("r1", "castle", "ann", chunks(b"first" * PART))
        await exports.put("r1", "castle", "ann", chunks(b"second"))
        stored = await exports.get("r1")
        assert stored is not None and stored["size"] == 6
        assert await read(exports, "r1") == b"second"

    async def test_erasing_a_subject_deletes_only_their_bundles(self, exports: Exports) -> None:
        for request_id, tenant, subject in [
            ("r1", "castle", "ann"),
            ("r2", "castle", "ann"),
            ("r3", "castle", "bob"),
            ("r4", "castle:2", "ann"),
        ]:
            await exports.put(request_id, tenant, subject, chunks(b"{}" * PART))
        assert await exports.erase_subject("castle", "ann") == 2
        assert [await exports.get(r) is None for r in ["r1", "r2", "r3", "r4"]] == [True, True, False, False]
        assert await read(exports, "r1") == b"" and await read(exports, "r3") == b"{}" * PART
        assert await exports.erase_subject("castle", "ann") == 0
