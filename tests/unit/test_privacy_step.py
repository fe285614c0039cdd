"""The erasure cascade and the export bundle of the privacy step, on the in-memory stores."""

from __future__ import annotations

import asyncio
import json

import pytest

from projections.position import Position
from projections.session import Exchange, SessionChange, SessionWrite, ThreadKey
from streams.steps.privacy import SubjectData, erase, export
from tests.unit.subject_stores import DAY_MS, T0, everything_about, remember, subject_data


async def stored_bundle(data: SubjectData, request_id: str) -> str:
    return b"".join([part async for part in data.exports.read(request_id)]).decode()


async def test_an_erasure_deletes_everything_about_the_subject_and_only_that() -> None:
    data = subject_data()
    await remember(data, "ann", 0)
    await remember(data, "bob", 10)
    ann_key, _ = await data.vault.key_for_write("castle", "ann")
    entry = await erase(data, "castle", "ann", "req-1", "op")
    assert entry["deleted"] == {
        "session_exchanges": 1,
        "shared_thread_lines": 1,
        "shared_thread_summaries": 1,
        "idempotency_keys": 1,
        "facts": 1,
        "fact_slots": 1,
        "traces": 1,
        "receipts": 1,
        "conversation_entries": 2,  # the question's entry and its conversation
        "exports": 1,
        "data_keys": 1,
    }
    assert await everything_about(data, "ann") == [None, [], [], [], [], [], [], [], None]
    assert await data.vault.keys_by_id([ann_key]) == {}
    assert all(await everything_about(data, "bob"))


async def test_an_erasure_redelivered_repeats_the_deletes_and_keeps_the_first_ledger_entry() -> None:
    data = subject_data()
    await remember(data, "ann", 0)
    first = await erase(data, "castle", "ann", "req-1", "op")
    await remember(data, "ann", 20)  # what a rebuilt namespace would hold again
    again = await erase(data, "castle", "ann", "req-1", "op")
    assert again == first
    assert await everything_about(data, "ann") == [None, [], [], [], [], [], [], [], None]
    erased = await data.ledger.erased("castle", "ann")
    assert erased is not None and erased["_id"] == "req-1"


async def test_an_export_bundles_what_the_stores_hold_about_the_subject_once() -> None:
    data = subject_data()
    await remember(data, "ann", 0)
    await remember(data, "bob", 10)
    await export(data, "castle", "ann", "exp-1", "op")
    text = await stored_bundle(data, "exp-1")
    bundle = json.loads(text)
    assert [fact["text"] for fact in bundle["facts"]] == ["ann likes tea"]
    assert [line["exchange_id"] for line in bundle["shared_thread_lines"]] == ["x0"]
    assert [run["run_id"] for run in bundle["traces"]] == ["run-ann"]
    assert [(r["receipt_id"], r["result"], r["detail"]) for r in bundle["receipts"]] == [
        ("rc-ann", "passed", "ann's chest holds 3 keys")
    ]
    assert "bob" not in text
    # written section by section, it is the text json.dumps writes of the whole
    assert text == json.dumps({**bundle, "exported_at": bundle["exported_at"]}, ensure_ascii=False, sort_keys=True)
    await data.facts.erase_subject("castle", "ann")
    await export(data, "castle", "ann", "exp-1", "op")  # redelivered: the bundle is made already
    assert await stored_bundle(data, "exp-1") == text


async def test_a_heavy_subjects_bundle_is_stored_in_parts_and_reads_back_whole() -> None:
    data = subject_data(part_bytes=4096)
    await remember(data, "ann", 0)
    for number in range(1, 400):  # facts, archives and traces of some size, and text that is not UTF-8
        await remember(data, "ann", number, text="é\ud800" + "x" * 50)
    await export(data, "castle", "ann", "exp-1", "op")
    stored = await data.exports.get("exp-1")
    assert stored is not None and stored["parts"] > 10
    bundle = json.loads(await stored_bundle(data, "exp-1"))
    assert len(bundle["traces"]) == 400 and bundle["facts"][0]["text"].startswith("é\ud800")


@pytest.mark.parametrize("kind", ["erased", "exported"])
async def test_each_request_is_recorded_in_the_ledger(kind: str) -> None:
    data = subject_data()
    await remember(data, "ann", 0)
    if kind == "erased":
        await erase(data, "castle", "ann", "req-1", "op")
    else:
        await export(data, "castle", "ann", "req-1", "op")
    assert [e["kind"] for e in await data.ledger.entries(tenant="castle", subject="ann")] == [kind]


async def test_what_a_projection_opened_before_the_erasure_and_writes_after_it_is_deleted_too() -> None:
    """A batch that opened the subject's records with their key, then wrote them after the deletes."""
    data = subject_data()
    await remember(data, "ann", 0)
    opened, write_now = asyncio.Event(), asyncio.Event()
    late = Exchange("x9", "ann asks late", tokens=3)

    async def projection_batch() -> None:
        async with data.sealer.batch():
            opened.set()
            await write_now.wait()
            change = SessionChange(late, False, 3, T0, T0 + DAY_MS, count_delta=1)
            await data.sessions.write(
                [SessionWrite(Position("threads", 0, 50), ThreadKey.session("castle", "ann"), change)], T0
            )

    batch = asyncio.create_task(projection_batch())
    await opened.wait()
    erasing = asyncio.create_task(erase(data, "castle", "ann", "req-1", "op"))
    await asyncio.sleep(0.05)
    assert not erasing.done()  # everything is deleted, and the erasure waits for the batch
    assert await data.sessions.read(ThreadKey.session("castle", "ann")) is None
    write_now.set()
    await batch
    entry = await erasing
    assert await data.sessions.read(ThreadKey.session("castle", "ann")) is None
    assert entry["deleted"]["session_exchanges"] == 2  # the first delete's, and the late write's
