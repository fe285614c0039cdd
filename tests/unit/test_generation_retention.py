"""Main's compacted and reset generations get an age limit (issue 36): the pure rules, then the retention
run over the log in a list (tests/unit/log.py): a generations purge is planned, produced, ledgered and
applied by the real archive and session steps; the current transcript and the session stay; a replay
rebuilds the same archive."""

from __future__ import annotations

from projections.archives import (
    NEVER,
    ConversationMeta,
    ConversationRef,
    Entry,
    RetentionPolicy,
    retention_purge_refusal,
)
from projections.generations import (
    GenerationAge,
    generation_ages,
    generations_due,
    generations_kept,
    generations_reason,
)
from projections.session import ThreadKey, ThreadPolicy
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadFolded, ThreadPurged, ThreadReset, now_ms
from streams.retention import apply_retention
from tests.conftest import base_settings
from tests.unit.log import World, world

MAIN = ConversationRef("castle", "session", "ada", "main")
SECOND = 1000
POLICY = RetentionPolicy(enabled=True, generation_ms=60 * SECOND)


def entry(seq: int, at: int, compacted_at: int = NEVER, reset_at: int = NEVER, archives: tuple[str, ...] = ()) -> Entry:
    return Entry(MAIN, f"e{seq}", f"threads:0:{seq}", seq, None, "question", at, "t", None, None, None, True,
                 compacted_at, reset_at, archives)  # fmt: skip


def test_a_generation_is_what_one_fold_or_reset_took_out_and_ages_from_its_newest_entry() -> None:
    entries = [
        entry(0, 100, compacted_at=4, reset_at=9),  # folded first: the fold's generation
        entry(1, 300, compacted_at=4),
        entry(2, 500, reset_at=9),
        entry(10, 900),  # the transcript: no generation
    ]
    ages = generation_ages(entries)
    assert ages == [GenerationAge(4, 300, 2), GenerationAge(9, 500, 1)]
    assert generations_due(ages, 60 * SECOND, 300 + 59 * SECOND) is None
    assert generations_due(ages, 60 * SECOND, 300 + 60 * SECOND) == ages[0]
    assert generations_due(ages, 60 * SECOND, 500 + 60 * SECOND) == ages[1]
    # an older generation not yet due holds back the newer ones: they go in order
    assert generations_due([GenerationAge(4, 900, 1), GenerationAge(9, 500, 1)], 60 * SECOND, 500 + 60 * SECOND) is None
    kept = generations_kept(("compact@4", "reset@9"), [entry(2, 500, reset_at=9, archives=("reset@9",))])
    assert kept == ("reset@9",)


def test_only_mains_generations_of_an_enabled_unprotected_retention_have_an_age_limit() -> None:
    meta = ConversationMeta(MAIN, generations=("reset@9",))
    assert generations_reason(meta, POLICY) is None
    assert generations_reason(meta, RetentionPolicy(generation_ms=1)) == "retention is disabled"
    assert generations_reason(ConversationMeta(MAIN, protected=True, generations=("reset@9",)), POLICY) == "protected"
    assert generations_reason(ConversationMeta(MAIN), POLICY) == "no generations"
    other = ConversationMeta(ConversationRef("castle", "session", "ada", "quest"), generations=("reset@9",))
    assert generations_reason(other, POLICY) is not None
    # and a retention purge of main itself is still refused (seed 004)
    assert retention_purge_refusal(meta, "main") is not None


async def turn(w: World, number: int, at: int, *, answered: bool = True) -> None:
    env = Envelope(tenant="castle", subject="ada", thread="session", producer="test", occurred_at=at)
    said = [QuestionAsked(env, f"x{number}", f"question {number}")]
    await w.log.produce([*said, AnswerGiven(env, f"x{number}", f"answer {number}")] if answered else said)


async def history(w: World) -> list[str]:
    return [e.entry_id for e in await w.live.conversations.entries(MAIN, scope="history", snapshot=2**61)]


async def test_a_scheduled_run_purges_mains_old_generations_and_leaves_its_transcript_and_session() -> None:
    w = world(base_settings(), ThreadPolicy())
    start = now_ms() - 600 * SECOND
    env = Envelope(tenant="castle", subject="ada", thread="session", producer="test", occurred_at=start + 50)
    await turn(w, 0, start)
    await turn(w, 1, start + 1)
    await w.log.produce([ThreadFolded(env, "f1", "question 0 -> answer 0", ("x0",), "extractive")])
    await turn(w, 2, start + 100)
    await w.log.produce([ThreadReset(env)])
    await turn(w, 3, now_ms(), answered=False)  # the transcript: a question still waiting for its answer
    before = await history(w)
    assert before == ["x0.q", "x0.a", "x1.q", "x1.a", "fold.f1", "x2.q", "x2.a", "x3.q"]

    dry = await apply_retention(w.live.conversations, None, "test", "castle", POLICY, now_ms())
    assert [(g["conversation"], g["entries"]) for g in dry["generations"]] == [("main", 7)]
    assert await history(w) == before  # a dry run deletes nothing

    ledger = w.data.ledger
    done = await apply_retention(
        w.live.conversations, w.log, "test", "castle", POLICY, now_ms(), confirm=True, ledger=ledger, by="schedule"
    )
    assert len(done["generations"]) == 1 and "position" in done["generations"][0]
    purges = [r for name, r, _ in w.log.records if name == ThreadPurged.TYPE]
    assert [(p["conversation"], p["reason"], p["generations_until"]) for p in purges] == [("main", "retention", 7)]
    assert await history(w) == ["x3.q"]
    meta = await w.live.conversations.meta(MAIN)
    assert meta is not None and meta.running and meta.generations == ()
    session = await w.live.sessions.read(ThreadKey.session("castle", "ada"))
    assert session is not None and [e.exchange_id for e in session.exchanges] == ["x3"]  # untouched by the purge
    entries = await ledger.entries(kind="retention")
    assert [(e["conversation"], e["generations_until"], e["entries"], e["by"]) for e in entries] == [
        ("main", 7, 7, "schedule")
    ]
    # nothing more is due; a replay of the log rebuilds the same archive
    again = await apply_retention(w.live.conversations, w.log, "test", "castle", POLICY, now_ms(), confirm=True)
    assert again["generations"] == []
    rebuilt = await w.log.replay()
    assert [e.entry_id for e in await rebuilt.conversations.entries(MAIN, scope="history", snapshot=2**61)] == ["x3.q"]


async def test_generations_younger_than_the_limit_stay() -> None:
    w = world(base_settings(), ThreadPolicy())
    await turn(w, 0, now_ms())
    env = Envelope(tenant="castle", subject="ada", thread="session", producer="test")
    await w.log.produce([ThreadReset(env)])
    done = await apply_retention(w.live.conversations, w.log, "test", "castle", POLICY, now_ms(), confirm=True)
    assert done["generations"] == [] and await history(w) == ["x0.q", "x0.a"]
