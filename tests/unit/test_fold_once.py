"""A thread folds once per crossing of the fold thresholds (seed 000: past 100 exchanges), never again
while no new exchanges cross them. The real session step, fold agent and scheduler over the log in a
list (tests/unit/log.py), with the projection behind the log: answers already logged are applied
after the fold was produced and before the fold itself, as under load. Each of them used to fold
the thread again, since the thread still read as past 100 exchanges until its fold was applied."""

from __future__ import annotations

import asyncio

from projections.session import ThreadKey, ThreadPolicy
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadFolded, now_ms
from streams.folds import FoldScheduler
from tests.conftest import base_settings
from tests.unit.log import World, world

POLICY = ThreadPolicy()  # seed 000's numbers
TENANT = "castle"
SUBJECT = "ada"
KEY = ThreadKey.session(TENANT, SUBJECT)


async def turn(w: World, number: int, at: int) -> None:
    env = Envelope(tenant=TENANT, subject=SUBJECT, thread="session", producer="test", occurred_at=at)
    await w.log.produce([QuestionAsked(env, f"x{number}", f"question {number}"), AnswerGiven(env, f"x{number}", "ok")])


def folds(w: World) -> int:
    return sum(1 for name, _, _ in w.log.records if name == ThreadFolded.TYPE)


async def deliver_all(w: World, scheduler: FoldScheduler) -> None:
    """The projection applies the log one record at a time; the folds its answers ask for run between.
    Until the whole log is applied and no fold is in flight."""
    while w.log.delivered < len(w.log.records) or scheduler.pending():
        if w.log.delivered == len(w.log.records):
            await asyncio.sleep(0.01)  # a fold waits for the projection to have applied it
            continue
        await w.log.deliver(1)
        for key in sorted(w.log.requested):
            scheduler.request(key)
        w.log.requested.clear()
        await scheduler.drain()


async def test_a_thread_folds_once_per_crossing_even_with_answers_applied_before_its_fold() -> None:
    w = world(base_settings(), POLICY)
    scheduler = FoldScheduler(w.folds, retry_seconds=1)
    w.log.lagging = True
    start = now_ms()
    for number in range(111):  # past 100 exchanges, and ten answers more logged before the fold
        await turn(w, number, start + number)
    await deliver_all(w, scheduler)
    assert folds(w) == 1
    session = await w.live.sessions.read(KEY)
    # seed 000: all but the newest 30 folded, then the ten answers applied after the fold
    assert session is not None and session.head.summary and session.head.count == 111 - 71
    assert session.exchanges[-1].exchange_id == "x110"

    # no new exchanges past the threshold: asking again folds nothing
    scheduler.request(KEY)
    await scheduler.drain()
    await deliver_all(w, scheduler)
    assert folds(w) == 1

    # the second crossing: once more past 100 exchanges, one fold more
    crossing = 101 - session.head.count
    for number in range(111, 111 + crossing + 10):
        await turn(w, number, start + number)
    await deliver_all(w, scheduler)
    assert folds(w) == 2
    again = await w.live.sessions.read(KEY)
    assert again is not None and again.head.count < POLICY.fold_exchanges
