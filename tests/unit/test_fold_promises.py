"""Seed 000's promises about when a session folds, held by the real session step and fold agent over the
log in a list (tests/unit/log.py), with seed 000's own thresholds (32,000 tokens, 100 exchanges, 24 h).

- 0.7 "The fold runs after the answer, so the player doesn't wait": an answer that takes a session past
  32,000 tokens asks for a fold, a question does not, so a thread whose question past 32,000 tokens is
  still unanswered is not folded.
- 0.9 "A player who left gets no summary: the session simply expires": no fold at expiry, and a player
  who comes back starts afresh, without a summary."""

from __future__ import annotations

from projections.session import ThreadKey, ThreadPolicy
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadFolded, now_ms
from tests.conftest import base_settings
from tests.unit.log import World, world

POLICY = ThreadPolicy()  # seed 000's numbers: nothing tuned for the test
TENANT = "castle"
SUBJECT = "ada"
KEY = ThreadKey.session(TENANT, SUBJECT)
DAY_MS = 86_400_000


def _env(at: int) -> Envelope:
    return Envelope(tenant=TENANT, subject=SUBJECT, thread="session", producer="test", occurred_at=at)


async def question(w: World, number: int, words: int, at: int) -> None:
    await w.log.produce([QuestionAsked(_env(at), f"x{number}", f"question {number} " + "stone " * words)])


async def answer(w: World, number: int, at: int) -> None:
    await w.log.produce([AnswerGiven(_env(at), f"x{number}", f"answer {number}")])


def folds(w: World) -> int:
    return sum(1 for name, _, _ in w.log.records if name == ThreadFolded.TYPE)


async def test_an_unanswered_question_past_32k_tokens_is_not_folded_until_its_answer() -> None:
    w = world(base_settings(), POLICY)
    start = now_ms()
    for number in range(3):  # 27,000 tokens, answered: below the threshold
        await question(w, number, 9_000, start + number)
        await answer(w, number, start + number)
    await question(w, 3, 9_000, start + 3)  # 36,000 tokens, between 32,000 and 42,000, unanswered
    held = await w.live.sessions.read(KEY)
    assert held is not None and POLICY.fold_tokens < held.head.tokens < POLICY.urgent_tokens
    assert w.log.requested == set()  # a question asks for no fold: the player is waiting for the answer
    await w.fold_requested()
    assert folds(w) == 0
    still = await w.live.sessions.read(KEY)
    assert still is not None and still.head.summary == "" and len(still.exchanges) == 4

    await answer(w, 3, start + 4)  # the answer lands: now, and only now, the fold runs
    assert w.log.requested == {KEY}
    await w.fold_requested()
    assert folds(w) == 1
    folded = await w.live.sessions.read(KEY)
    assert folded is not None and folded.head.summary and folded.head.tokens < POLICY.fold_tokens
    assert folded.exchanges[-1].answer == "answer 3"  # the newest exchange stays whole


async def test_a_player_who_left_gets_no_summary_the_session_simply_expires() -> None:
    w = world(base_settings(), POLICY)
    start = now_ms()
    for number in range(20):
        await question(w, number, 50, start + number)
        await answer(w, number, start + number)
    assert (await w.live.sessions.read(KEY)) is not None
    assert w.log.requested == set()

    w.live.sessions.now_ms = start + 19 + DAY_MS  # 24 h after the last question: the session is gone
    assert await w.live.sessions.read(KEY) is None
    assert await w.folds.fold(KEY, force=True) is None  # not even a forced fold makes a summary of it
    assert folds(w) == 0

    back = start + DAY_MS + 3_600_000  # the player comes back the next day: a fresh session
    await question(w, 100, 5, back)
    await answer(w, 100, back)
    fresh = await w.live.sessions.read(KEY)
    assert fresh is not None
    assert fresh.head.summary == "" and fresh.head.folded is None
    assert [exchange.exchange_id for exchange in fresh.exchanges] == ["x100"]
    assert "Summary" not in fresh.render(KEY) and folds(w) == 0
