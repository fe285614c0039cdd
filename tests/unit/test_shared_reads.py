"""The projections of one topic in one worker read each record once (streams/shared_reads.py, issue 38).

Sealed records of a subject, read by three projectors that share their reads: the second and third
take what the first read, and a subject erased in between is read afresh by them, as erased.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from memlog.adapters.in_memory import InMemoryCheckpoints
from memlog.adapters.in_memory.privacy import InMemoryKeyVault
from projections.position import Position
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent, to_record
from streams.projector import Projector, Record
from streams.sealer import Sealer
from streams.shared_reads import SharedReads
from tests.dead_letters import Counted, Letters

CODEC = Codec(Catalog())


class Applied:
    """A projection's step that keeps what it was given."""

    def __init__(self) -> None:
        self.events: list[ThreadEvent] = []

    async def __call__(self, run: Sequence[tuple[ThreadEvent, Position]]) -> None:
        self.events.extend(event for event, _ in run)


class DistantVault(InMemoryKeyVault):
    """A vault a round trip away: asking it for keys lets the event loop run something else meanwhile."""

    async def keys_by_id(self, key_ids: list[str]) -> dict[str, bytes]:
        await asyncio.sleep(0.01)
        return await super().keys_by_id(key_ids)


def projector(name: str, sealer: Sealer, shared: SharedReads | None, step: Applied) -> Projector[ThreadEvent]:
    return Projector(
        name=name,
        topic="threads",
        source_topic="memlog.threads",
        codec=CODEC,
        accepts=(QuestionAsked, AnswerGiven),
        step=step,
        checkpoints=InMemoryCheckpoints(),
        dead_letters=Letters(),
        counter=Counted(),  # type: ignore[arg-type]
        sealer=sealer,
        shared=shared,
    )


async def sealed_records(sealer: Sealer, subject: str, count: int, first: int = 0) -> list[Record]:
    envelope = Envelope(tenant="castle", subject=subject, thread="session", producer="test")
    out = []
    for n in range(first, first + count):
        event = QuestionAsked(envelope, f"x{n}", f"question {n}")
        value = CODEC.encode(event.TYPE, await sealer.seal(event.TYPE, to_record(event)))
        out.append(Record(0, n, None, value))
    return out


async def test_three_projections_of_a_topic_read_each_record_once_and_apply_the_same_events() -> None:
    sealer = Sealer(InMemoryKeyVault(os.urandom(32)))
    shared = SharedReads(("sessions", "archive", "facts-activity"))
    steps = [Applied(), Applied(), Applied()]
    batch = await sealed_records(sealer, "ann", 20)
    for name, step in zip(("sessions", "archive", "facts-activity"), steps, strict=True):
        await projector(name, sealer, shared, step).handle(batch)
    unshared = Applied()
    await projector("alone", sealer, None, unshared).handle(batch)
    assert [e.question for e in unshared.events] == [f"question {n}" for n in range(20)]
    assert all(step.events == unshared.events for step in steps)
    assert shared.hits == 40 and len(shared) == 0  # read once, taken by the two others, then let go


async def test_agents_handed_the_same_records_at_once_still_read_them_once() -> None:
    vault = DistantVault(os.urandom(32))
    batch = await sealed_records(Sealer(vault), "ann", 20)
    sealer = Sealer(vault)  # its keys not cached yet: the first read waits on the vault
    shared = SharedReads(("sessions", "archive", "facts-activity"))
    steps = [Applied(), Applied(), Applied()]
    names = ("sessions", "archive", "facts-activity")
    await asyncio.gather(*(projector(n, sealer, shared, s).handle(batch) for n, s in zip(names, steps, strict=True)))
    assert all(len(step.events) == 20 and step.events == steps[0].events for step in steps)
    assert shared.hits == 40


async def test_a_subject_erased_after_the_first_read_is_read_as_erased_by_the_others() -> None:
    vault = InMemoryKeyVault(os.urandom(32))
    sealer = Sealer(vault)
    shared = SharedReads(("sessions", "archive"))
    batch = await sealed_records(sealer, "ann", 5) + await sealed_records(sealer, "bob", 5, first=5)
    first, second = Applied(), Applied()
    await projector("sessions", sealer, shared, first).handle(batch)
    await vault.begin_erasure("castle", "ann")  # as the privacy step erases: the vault, then this process's keys
    sealer.forget()
    await vault.delete("castle", "ann")
    later = projector("archive", sealer, shared, second)
    await later.handle(batch)
    assert len(first.events) == 10
    assert [e.envelope.subject for e in second.events] == ["bob"] * 5
    assert later.shredded_by | later.expired_by == {("castle", "ann"): 5}  # its key (a period key) is gone
    assert shared.hits == 5  # bob's


async def test_a_key_past_its_cache_time_is_asked_for_again_before_a_shared_read_is_used() -> None:
    vault = InMemoryKeyVault(os.urandom(32))
    sealer = Sealer(vault, cache_seconds=0)  # every read asks the vault, as after the cache time elsewhere
    shared = SharedReads(("sessions", "archive"))
    batch = await sealed_records(sealer, "ann", 3)
    await projector("sessions", sealer, shared, Applied()).handle(batch)
    await vault.begin_erasure("castle", "ann")  # erased by another process: this one forgot nothing
    second = Applied()
    later = projector("archive", sealer, shared, second)
    await later.handle(batch)
    assert second.events == [] and later.shredded_by | later.expired_by == {("castle", "ann"): 3}


async def test_another_record_at_the_same_place_is_read_afresh() -> None:
    sealer = Sealer(InMemoryKeyVault(os.urandom(32)))
    shared = SharedReads(("sessions", "archive"))
    await projector("sessions", sealer, shared, Applied()).handle(await sealed_records(sealer, "ann", 3))
    other = await sealed_records(sealer, "bob", 3)  # the same offsets, other bytes (a topic made again)
    second = Applied()
    await projector("archive", sealer, shared, second).handle(other)
    assert [e.envelope.subject for e in second.events] == ["bob"] * 3 and shared.hits == 0 and len(shared) == 0


async def test_what_a_lagging_reader_has_not_taken_is_let_go_past_the_bound() -> None:
    sealer = Sealer(InMemoryKeyVault(os.urandom(32)))
    batch = await sealed_records(sealer, "ann", 50)
    bound = sum(len(r.value or b"") for r in batch[-10:])
    shared = SharedReads(("sessions", "archive"), max_bytes=bound)
    await projector("sessions", sealer, shared, Applied()).handle(batch)
    assert len(shared) == 10  # the newest
    second = Applied()
    await projector("archive", sealer, shared, second).handle(batch)
    assert len(second.events) == 50 and shared.hits == 10 and len(shared) == 0


class GatedVault(InMemoryKeyVault):
    """A vault that answers nothing while `gate` is closed: a read waiting on it holds `reading`."""

    def __init__(self, master: bytes) -> None:
        super().__init__(master)
        self.gate = asyncio.Event()
        self.gate.set()
        self.asked = asyncio.Event()

    async def keys_by_id(self, key_ids: list[str]) -> dict[str, bytes]:
        self.asked.set()
        await self.gate.wait()
        return await super().keys_by_id(key_ids)


async def test_the_sessions_do_not_wait_behind_another_projections_read_on_the_vault() -> None:
    vault = GatedVault(os.urandom(32))
    writer = Sealer(vault)
    ann_before = await sealed_records(writer, "ann", 3)
    bob = await sealed_records(writer, "bob", 3, first=3)
    ann_after = await sealed_records(writer, "ann", 3, first=6)
    sealer = Sealer(vault)  # the worker's: ann's key cached by the sessions' first batch, bob's not
    shared = SharedReads(("sessions", "archive"), first=("sessions",))
    sessions, archive = Applied(), Applied()
    await projector("sessions", sealer, shared, sessions).handle(ann_before)
    vault.gate.clear()
    vault.asked.clear()
    stuck = asyncio.create_task(projector("archive", sealer, shared, archive).handle(bob))
    await vault.asked.wait()  # the archive holds `reading`, waiting on the vault for bob's key
    assert shared.reading.locked()
    # a hang guard, not a timing check: without `first` this waits until the vault answers, never here
    await asyncio.wait_for(projector("sessions", sealer, shared, sessions).handle(ann_after), 30)
    assert [e.question for e in sessions.events] == [f"question {n}" for n in (0, 1, 2, 6, 7, 8)]
    assert not stuck.done()
    vault.gate.set()
    await stuck
    assert [e.question for e in archive.events] == ["question 3", "question 4", "question 5"]
    unshared = Applied()
    await projector("alone", Sealer(vault), None, unshared).handle(ann_after)
    assert sessions.events[3:] == unshared.events  # what it read for itself is what a fresh read gives


async def test_without_first_the_sessions_wait_for_the_read_in_progress() -> None:
    vault = GatedVault(os.urandom(32))
    writer = Sealer(vault)
    ann = await sealed_records(writer, "ann", 3)
    bob = await sealed_records(writer, "bob", 3, first=3)
    sealer = Sealer(vault)
    shared = SharedReads(("sessions", "archive"))
    sessions, archive = Applied(), Applied()
    await projector("sessions", sealer, shared, sessions).handle(ann)
    vault.gate.clear()
    vault.asked.clear()
    stuck = asyncio.create_task(projector("archive", sealer, shared, archive).handle(bob))
    await vault.asked.wait()
    waiting = asyncio.create_task(projector("sessions", sealer, shared, sessions).handle(ann))
    for _ in range(20):  # loop turns: the sessions' read is queued on `reading`
        await asyncio.sleep(0)
    assert not waiting.done()
    vault.gate.set()
    await asyncio.gather(stuck, waiting)
    assert len(sessions.events) == 6 and len(archive.events) == 3
