"""A batch of costly records is applied, and its checkpoint advanced, in steps of bounded bytes.

Issue 41: 500 archive entries of 22 KB in one batch took longer than MEMLOG_WATCHDOG_BATCH_SECONDS on
SecantusDB, and the watchdog stopped the worker. Applied in steps, the checkpoint moves while the
batch is still in progress.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlog.adapters.in_memory import InMemoryCheckpoints
from projections.position import Position
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import AnswerGiven, Envelope, QuestionAsked, to_record
from streams.projector import APPLY_STEP_BYTES, Projector, Record
from tests.dead_letters import Counted, Letters

CODEC = Codec(Catalog())


def records(count: int, answer_bytes: int) -> list[Record]:
    envelope = Envelope(tenant="castle", subject="ann", thread="session", producer="test")
    out = []
    for n in range(count):
        event = (
            QuestionAsked(envelope, f"x{n}", "what?")
            if n % 2 == 0
            else AnswerGiven(envelope, f"x{n}", "a" * answer_bytes)
        )
        out.append(Record(0, n, None, CODEC.encode(event.TYPE, to_record(event))))
    return out


async def run_batch(batch: Sequence[Record]) -> tuple[list[int], list[int]]:
    """The offsets of each step the projector applied, and the checkpoint seen at the start of each step."""
    checkpoints = InMemoryCheckpoints()
    steps: list[int] = []
    seen: list[int] = []

    async def step(run: Sequence[tuple[object, Position]]) -> None:
        seen.append(await checkpoints.applied("threads", 0))
        steps.append(len(run))
        for _, position in run:
            await checkpoints.advance(position)

    projector: Projector[QuestionAsked | AnswerGiven] = Projector(
        name="steps",
        topic="threads",
        source_topic="memlog.threads",
        codec=CODEC,
        accepts=(QuestionAsked, AnswerGiven),
        step=step,
        checkpoints=checkpoints,
        dead_letters=Letters(),
        counter=Counted(),  # type: ignore[arg-type]
    )
    await projector.handle(batch)
    assert await checkpoints.applied("threads", 0) == len(batch) - 1
    return steps, seen


async def test_a_batch_of_costly_records_is_applied_in_steps_and_its_checkpoint_moves_between_them() -> None:
    batch = records(120, 40_000)  # about 2.4 MB: at least two steps
    steps, seen = await run_batch(batch)
    assert len(steps) >= 2 and sum(steps) == len(batch)
    assert seen == sorted(seen) and seen[0] == -1 and seen[-1] > 0, "the checkpoint advanced between steps"
    by_offset = [len(r.value or b"") for r in batch]
    start = 0
    for count in steps[:-1]:  # every step but the last is the first run of records past the bound
        size = sum(by_offset[start : start + count])
        assert size >= APPLY_STEP_BYTES and size - by_offset[start + count - 1] < APPLY_STEP_BYTES
        start += count


async def test_a_batch_of_small_records_is_applied_in_one_step() -> None:
    steps, _ = await run_batch(records(500, 100))
    assert steps == [500]
