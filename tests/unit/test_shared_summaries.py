"""Summaries of shared threads kept per asker, and folds sealed under the keys of what they read: erasing
someone takes their lines and their part of every summary away, live and in every replay. In process:
the log is a list (tests/unit/log.py), the projections are the real steps on the in-memory stores."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlog.adapters.summarizers import ExtractiveSummarizer
from memlog.config.settings import Settings
from projections.folded import Folded
from projections.sealing import sealed_key_id
from projections.session import (
    Exchange,
    Segment,
    SessionHead,
    ThreadKey,
    ThreadPolicy,
    apply_event,
)
from projections.shared import MAX_SEGMENTS, plan_segments
from schemas.errors import InvalidEvent
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadFolded, now_ms
from streams.steps.privacy import erase
from tests.conftest import base_settings
from tests.unit.log import World, tokens_add_up, words, world

# small enough that a dozen exchanges fold a few times
POLICY = ThreadPolicy(fold_exchanges=4, keep_min=1, keep_max=2, keep_tokens=12, summary_chars=600)
SETTINGS: Settings = base_settings()
TENANT = "castle"


def thread_key(thread: str) -> ThreadKey:
    return ThreadKey.public(TENANT) if thread == "public" else ThreadKey.automation(TENANT, "helper")


async def ask(w: World, thread: str, asker: str, number: int, at: int, *, fold: bool = True) -> None:
    """One whole exchange by `asker`, then (unless told not to) the folds it asks for."""
    env = Envelope(
        tenant=TENANT,
        subject=asker,
        agent="helper" if thread == "automation" else None,
        thread=thread,
        producer="test",
        occurred_at=at,
    )
    mark = f"{asker.upper()}{number}X"
    await w.log.produce(
        [QuestionAsked(env, f"x{number}", f"{mark} asks"), AnswerGiven(env, f"x{number}", f"{mark} ok")]
    )
    if fold:
        await w.fold_requested()


async def converse(w: World, thread: str, askers: Sequence[str]) -> int:
    start = now_ms()
    for number, asker in enumerate(askers):
        await ask(w, thread, asker, number, start + number)
    return start


async def test_each_askers_lines_fold_into_their_own_part_sealed_under_their_key() -> None:
    w = world(SETTINGS, POLICY)
    await converse(w, "public", ["ann", "bob"] * 6)
    public = await w.live.sessions.read(ThreadKey.public(TENANT))
    assert public is not None and tokens_add_up(public)
    parts = {segment.asker: segment.text for segment in public.head.segments}
    assert set(parts) == {"ann", "bob"}
    assert "ANN" in parts["ann"] and "BOB" not in parts["ann"] and "ann" not in parts["bob"]
    assert public.render().startswith("Summary of the earlier conversation:\n")
    folds = [(record, name) for name, record, _ in w.log.records if name == ThreadFolded.TYPE]
    assert folds
    for record, _ in folds:
        env = record["envelope"]
        # sealed under the asker's key of the fold's period (pinned before the thread was read)
        key_id, _ = await w.data.vault.key_for_write(env["tenant"], env["subject"], env["occurred_at"])
        assert sealed_key_id(record) == key_id and record["summary"] == ""  # in clear, nothing


@given(
    thread=st.sampled_from(["public", "automation"]),
    askers=st.lists(st.sampled_from(["ann", "bob", "cat"]), min_size=1, max_size=24),
    gone=st.sampled_from(["ann", "bob", "cat"]),
)
@settings(max_examples=40, deadline=None)
async def test_erasing_an_asker_leaves_none_of_their_text_live_or_replayed(
    thread: str, askers: list[str], gone: str
) -> None:
    w = world(SETTINGS, POLICY)
    await converse(w, thread, askers)
    before = await w.live.dump(TENANT)
    if gone in askers:
        assert gone.upper() in before  # the check below can fail: their text was there
    await erase(w.data, TENANT, gone, "req-1", "op")
    live = await w.live.dump(TENANT)
    replayed = await (await w.log.replay()).dump(TENANT)
    for text in (live, replayed):
        assert gone.upper() not in text and f"'{gone}'" not in text and f"{gone}:" not in text
    for other in {"ann", "bob", "cat"} & set(askers) - {gone}:
        assert other.upper() in live and other.upper() in replayed
    shared = await w.live.sessions.read(thread_key(thread))
    assert shared is None or tokens_add_up(shared)


class ErasesWhileSummarizing(ExtractiveSummarizer):
    """A slow summarizer: while it writes the summary, the subject is erased and comes back (a new key)."""

    def __init__(self, subject: str, thread: str) -> None:
        self.subject, self.thread = subject, thread
        self.world: World | None = None

    async def summarize(self, previous: str, folded: Sequence[Exchange], limit: int) -> str:
        summary = await super().summarize(previous, folded, limit)
        w = self.world
        if w is not None and any(exchange.subject in (self.subject, None) for exchange in folded):
            self.world = None  # once
            await erase(w.data, TENANT, self.subject, "req-1", "op")
            await ask(w, self.thread, self.subject, 99, now_ms(), fold=False)  # writes again: a fresh data key
        return summary


@pytest.mark.parametrize("thread", ["session", "public"])
async def test_a_fold_that_read_before_an_erasure_is_shredded_with_it(thread: str) -> None:
    summarizer = ErasesWhileSummarizing("ann", thread)
    w = world(SETTINGS, POLICY, summarizer)
    start = now_ms()
    for number in range(5):  # the fifth asks for a fold
        asker = "ann" if thread == "session" or number % 2 == 0 else "bob"
        await ask(w, thread, asker, number, start + number, fold=False)
    summarizer.world = w  # the fold races the erasure
    await w.fold_requested()
    assert summarizer.world is None, "the race did not happen"
    live, replayed = await w.live.dump(TENANT), await (await w.log.replay()).dump(TENANT)
    for text in (live, replayed):
        assert "ANN99X" in text  # what ann wrote after her erasure is hers again
        assert not any(f"ANN{number}X" in text for number in range(5))
    if thread == "public":
        assert "BOB1X" in live and "BOB1X" in replayed  # bob's part of that fold stands
    # the fold was produced after the erasure, under the key it read with: that key is gone
    folds = [record for name, record, _ in w.log.records if name == ThreadFolded.TYPE]
    key_ids = {sealed_key_id(record) for record in folds if record["envelope"]["subject"] == "ann"}
    assert key_ids and await w.data.vault.keys_by_id(sorted(k for k in key_ids if k)) == {}


def line(exchange_id: str, asker: str | None, at: int = 0, text: str = "q") -> Exchange:
    return Exchange(exchange_id, text, answer="a", occurred_at=at, tokens=2, subject=asker)


def test_parts_share_the_summary_evenly_and_never_take_anothers_lines() -> None:
    head = SessionHead(segments=(Segment("ann", "a" * 500, 50, 1), Segment("bob", "b" * 100, 10, 2)))
    plans = plan_segments(head, [line("x1", "cat", 5), line("x2", "ann", 6), line("x3", "cat", 7)], 600)
    assert [(plan.asker, [e.exchange_id for e in plan.folded], plan.budget) for plan in plans] == [
        ("ann", ["x2"], 200),
        ("cat", ["x1", "x3"], 200),
    ]  # bob's part fits its share and is left as it is
    shortened = plan_segments(head, [line("x1", "cat", 5)], 600)
    assert [(plan.asker, plan.folded, plan.previous, plan.budget) for plan in shortened] == [
        ("ann", (), "a" * 500, 200),  # over its share: shortened, covering nothing
        ("cat", (line("x1", "cat", 5),), "", 200),
    ]


def test_past_the_most_parts_the_least_recent_askers_part_is_dropped() -> None:
    held = tuple(Segment(f"s{n:02d}", "x", 1, n) for n in range(MAX_SEGMENTS))
    plans = plan_segments(SessionHead(segments=held), [line("x1", "new", 100), line("x2", None, 101)], 1200)
    dropped = [plan.asker for plan in plans if plan.budget == 0]
    assert dropped == ["s00", "s01"]
    assert {plan.asker for plan in plans if plan.budget} == {None, "new"}


def fold_env(asker: str | None, thread: str = "public", at: int = 10) -> Envelope:
    return Envelope(tenant=TENANT, subject=asker, thread=thread, producer="test", occurred_at=at)


def test_a_part_that_covers_anothers_lines_is_refused() -> None:
    head = SessionHead(last_question_at=10, tokens=4, count=2)
    covered = {"x1": line("x1", "ann"), "x2": line("x2", "bob")}
    event = ThreadFolded(fold_env("ann"), "f1", "ann and bob", ("x1", "x2"), "extractive", segment=True)
    assert apply_event(head, None, event, ttl_ms=10**9, count_tokens=words, covered=covered) is None
    own = ThreadFolded(fold_env("ann"), "f1", "ann asked", ("x1",), "extractive", segment=True)
    change = apply_event(head, None, own, ttl_ms=10**9, count_tokens=words, covered=covered)
    assert (
        change is not None
        and change.remove == ("x1",)
        and change.segment == Segment("ann", "ann asked", 2, 10, Folded("extractive", 1, 2, 0, 0))
    )
    assert change.token_delta == 2 - 2 and change.count_delta == -1


def test_shortening_a_part_the_thread_no_longer_holds_brings_nothing_back() -> None:
    """After a reset or the asker's erasure the part is gone; a late shortening of it must not revive it."""
    shorter = ThreadFolded(fold_env("ann"), "f2", "ann, in short", (), "extractive", segment=True)
    fresh = SessionHead(last_question_at=10, tokens=2, count=1)
    assert apply_event(fresh, None, shorter, ttl_ms=10**9, count_tokens=words, covered={}) is None
    holding = SessionHead(last_question_at=10, tokens=5, count=1, segments=(Segment("ann", "ann said a lot", 4, 5),))
    change = apply_event(holding, None, shorter, ttl_ms=10**9, count_tokens=words, covered={})
    assert change is not None and change.token_delta == 3 - 4 and change.remove == ()


def test_only_a_shared_thread_has_parts_and_only_a_part_may_cover_nothing() -> None:
    with pytest.raises(InvalidEvent, match="segment"):
        ThreadFolded(fold_env("ann", "session"), "f1", "s", ("x1",), "extractive", segment=True)
    with pytest.raises(InvalidEvent, match="covers"):
        ThreadFolded(fold_env(None), "f1", "s", (), "extractive")
    assert ThreadFolded(fold_env("ann"), "f1", "", (), "extractive", segment=True).covers == ()


def test_the_summary_reads_as_its_parts_oldest_first() -> None:
    head = SessionHead(segments=(Segment("bob", "bob part", 2, 1), Segment("ann", "ann part", 2, 3)))
    assert head.summary_text == "bob part\nann part"
    legacy = SessionHead(summary="before parts", segments=head.segments)
    assert legacy.summary_text == "before parts\nbob part\nann part"
