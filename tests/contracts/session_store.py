"""The SessionStore contract, run against every implementation.

The contract suite; the test module test_session_store.py runs it against each adapter."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from projections.folded import Folded
from projections.ports import SessionStore, ThreadKey
from projections.position import Position
from projections.ready import ReadyThread, ready_view
from projections.session import (
    Exchange,
    Segment,
    SessionChange,
    SessionHead,
    SessionWrite,
    ThreadPolicy,
    ToolCall,
    apply_event,
)
from projections.tokens import TokenCounter
from projections.traces import Served, link_line, served_links
from schemas.events import AnswerGiven, Envelope, QuestionAsked, ThreadEvent, ThreadFolded, now_ms
from streams.steps.sessions import SessionStep

TTL = 3_600_000


KEY = ThreadKey.session("castle", "ann")


def _mark(until_ms: int, run_id: str = "r1") -> Served:
    """A served mark of one run serving KEY's exchange x1, kept until `until_ms`."""
    link = {"exchange_id": "x1", "run_id": run_id, "started_at": until_ms - 1, "expires_at": until_ms}
    return Served(link_line(link), until_ms)


def envelope(at: int, tenant: str = "castle") -> Envelope:
    return Envelope(tenant=tenant, subject="ann", thread="session", producer="test", occurred_at=at)


class SessionStoreContract:
    """Subclasses provide `store` and `clock` (the store's notion of now, epoch ms)."""

    @pytest.fixture
    def clock(self) -> int:
        return now_ms()

    async def apply_plan(
        self,
        store: SessionStore,
        event: ThreadEvent,
        offset: int,
        now: int,
        count: TokenCounter,
        key: ThreadKey = KEY,
        partition: int = 0,
    ) -> bool:
        loaded = await store.load([(key, event.exchange_id)])
        head, exchange = loaded[(key, event.exchange_id)]
        change = apply_event(head, exchange, event, ttl_ms=TTL, count_tokens=count)
        assert change is not None
        (applied,) = await store.write([SessionWrite(Position("threads", partition, offset), key, change)], now)
        return applied

    async def test_a_written_exchange_reads_back_whole(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        await self.apply_plan(store, QuestionAsked(envelope(clock), "x1", "where?"), 0, clock, count_tokens)
        await self.apply_plan(store, AnswerGiven(envelope(clock), "x1", "there"), 1, clock, count_tokens)
        session = await store.read(KEY)
        assert session is not None
        (exchange,) = session.exchanges
        assert (exchange.question, exchange.answer) == ("where?", "there")
        assert session.head.tokens == exchange.tokens > 0
        assert session.head.last_question_at == clock

    async def test_a_position_already_applied_is_not_applied_twice(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        question = QuestionAsked(envelope(clock), "x1", "where?")
        assert await self.apply_plan(store, question, 5, clock, count_tokens)
        change = SessionChange(Exchange("x2", "other"), False, 7, clock, clock + TTL, count_delta=1)
        again = [
            SessionWrite(Position("threads", 0, 5), KEY, change),
            SessionWrite(Position("threads", 0, 4), KEY, change),
        ]
        assert await store.write(again, clock) == [False, False]
        session = await store.read(KEY)
        assert session is not None and [e.exchange_id for e in session.exchanges] == ["x1"]

    async def test_a_batch_redelivered_after_a_partial_write_applies_each_event_once(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        bob = ThreadKey.session("castle", "bob")
        bob_env = Envelope(tenant="castle", subject="bob", thread="session", producer="test", occurred_at=clock)
        batch: list[tuple[ThreadEvent, Position]] = [
            (QuestionAsked(envelope(clock), "x1", "where?"), Position("threads", 0, 3)),
            (QuestionAsked(bob_env, "y1", "when?"), Position("threads", 0, 4)),
            (AnswerGiven(envelope(clock), "x1", "there"), Position("threads", 0, 5)),
            (AnswerGiven(bob_env, "y1", "now"), Position("threads", 0, 6)),
        ]
        step = SessionStep(store, policy=ThreadPolicy(), count_tokens=count_tokens)
        await step(batch[:2])  # the first half landed, then the worker died before committing
        await step(batch)  # the whole batch comes again
        ann_session, bob_session = await store.read(KEY), await store.read(bob)
        assert ann_session is not None and bob_session is not None
        assert [(e.exchange_id, e.question, e.answer) for e in ann_session.exchanges] == [("x1", "where?", "there")]
        assert [(e.exchange_id, e.question, e.answer) for e in bob_session.exchanges] == [("y1", "when?", "now")]
        assert ann_session.head.tokens == count_tokens("where?") + count_tokens("there")
        assert (ann_session.head.count, bob_session.head.count) == (1, 1)
        assert await store.applied("threads", 0) == 6
        # and once more: every position is applied already, nothing changes
        changes = [SessionChange(Exchange("x9", "late"), False, 5, clock, clock + TTL, count_delta=1)] * 4
        writes = [
            SessionWrite(position, key, change)
            for (_, position), key, change in zip(batch, [KEY, bob, KEY, bob], changes, strict=True)
        ]
        assert await store.write(writes, clock) == [False, False, False, False]
        assert await store.read(KEY) == ann_session

    async def test_a_redelivered_fold_of_an_expired_exchange_changes_nothing(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        """x0's session expired before x1; a fold of x0, delivered again with x0 and x1, folds nothing."""
        late = clock - 1
        events: list[ThreadEvent] = [
            QuestionAsked(envelope(late - TTL - 1), "x0", "unanswered"),
            QuestionAsked(envelope(late), "x1", "again"),
            ThreadFolded(envelope(late), "f1", "summary", ("x0",), "extractive"),
            QuestionAsked(envelope(clock), "x2", "and again"),
        ]
        batch = [(event, Position("threads", 0, offset)) for offset, event in enumerate(events)]
        step = SessionStep(
            store, policy=ThreadPolicy(session_ttl_ms=TTL), count_tokens=count_tokens, clock=lambda: clock
        )
        await step(batch[:3])  # applied, then the worker died before committing
        await step(batch)  # everything comes again
        session = await store.read(KEY)
        assert session is not None and [e.exchange_id for e in session.exchanges] == ["x1", "x2"]
        assert (session.head.count, session.head.folded, session.head.summary) == (2, None, "")
        assert session.head.tokens == count_tokens("again") + count_tokens("and again")

    async def test_a_write_without_a_change_only_advances_the_checkpoint(self, store: SessionStore, clock: int) -> None:
        assert await store.write([SessionWrite(Position("threads", 1, 7))], clock) == [True]
        assert await store.applied("threads", 1) == 7
        assert await store.read(KEY) is None

    async def test_loading_a_missing_session_gives_nothing(self, store: SessionStore) -> None:
        assert await store.load([(KEY, "x1"), (KEY, "x2")]) == {(KEY, "x1"): (None, None), (KEY, "x2"): (None, None)}

    async def test_checkpoints_only_move_forward(self, store: SessionStore) -> None:
        assert await store.applied("threads", 3) == -1
        await store.advance(Position("threads", 3, 10))
        await store.advance(Position("threads", 3, 4))
        assert await store.applied("threads", 3) == 10
        assert await store.applied("threads", 2) == -1
        many = getattr(store, "applied_many")  # noqa: B009 (not part of the protocol: the watchdog's round)
        assert await many("threads", [2, 3]) == [-1, 10]

    async def test_a_write_advances_the_checkpoint_of_its_partition(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        await self.apply_plan(store, QuestionAsked(envelope(clock), "x1", "q"), 41, clock, count_tokens, partition=2)
        assert await store.applied("threads", 2) == 41

    async def test_an_already_expired_change_is_not_written(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        old = clock - TTL - 1000
        assert await self.apply_plan(store, QuestionAsked(envelope(old), "x1", "q"), 0, clock, count_tokens)
        assert await store.read(KEY) is None
        assert await store.applied("threads", 0) == 0

    async def test_exchanges_keep_their_first_arrival_order(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        for offset, exchange_id in enumerate(["b", "a", "c"]):
            await self.apply_plan(store, QuestionAsked(envelope(clock), exchange_id, "q"), offset, clock, count_tokens)
        await self.apply_plan(store, AnswerGiven(envelope(clock), "a", "done"), 3, clock, count_tokens)
        session = await store.read(KEY)
        assert session is not None
        assert [e.exchange_id for e in session.exchanges] == ["b", "a", "c"]

    async def test_tenants_do_not_share_a_subject(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        other = ThreadKey.session("castle:2", "ann")
        await self.apply_plan(store, QuestionAsked(envelope(clock), "x1", "mine"), 0, clock, count_tokens)
        await self.apply_plan(
            store, QuestionAsked(envelope(clock, "castle:2"), "x1", "theirs"), 1, clock, count_tokens, key=other
        )
        mine, theirs = await store.read(KEY), await store.read(other)
        assert mine is not None and theirs is not None
        assert [e.question for e in mine.exchanges] == ["mine"]
        assert [e.question for e in theirs.exchanges] == ["theirs"]

    async def test_a_reset_change_starts_the_session_afresh(self, store: SessionStore, clock: int) -> None:
        await store.write(
            [
                SessionWrite(
                    Position("threads", 0, 0),
                    KEY,
                    SessionChange(Exchange("x1", "old", tokens=3), False, 3, clock, clock + TTL, count_delta=1),
                ),
                SessionWrite(
                    Position("threads", 0, 1),
                    KEY,
                    SessionChange(Exchange("x2", "new", tokens=2), True, 2, clock, clock + TTL, count_delta=1),
                ),
            ],
            clock,
        )
        session = await store.read(KEY)
        assert session is not None
        assert [e.exchange_id for e in session.exchanges] == ["x2"]
        assert session.head == SessionHead(last_question_at=clock, tokens=2, count=1)

    async def test_a_fold_replaces_exchanges_by_the_summary(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        for offset, exchange_id in enumerate(["a", "b", "c"]):
            await self.apply_plan(
                store,
                QuestionAsked(envelope(clock), exchange_id, f"question {exchange_id}"),
                offset,
                clock,
                count_tokens,
            )
        before = await store.read(KEY)
        assert before is not None
        folded = [e for e in before.exchanges if e.exchange_id in ("a", "b")]
        change = SessionChange(
            None,
            False,
            5 - sum(e.tokens for e in folded),
            clock,
            clock + TTL,
            remove=("a", "b"),
            summary="asked a and b",
            summary_tokens=5,
            count_delta=-2,
        )
        assert await store.write([SessionWrite(Position("threads", 0, 3), KEY, change)], clock) == [True]
        session = await store.read(KEY)
        assert session is not None
        assert [e.exchange_id for e in session.exchanges] == ["c"]
        assert session.head.summary == "asked a and b" and session.head.summary_tokens == 5
        assert session.head.count == 1
        assert session.head.tokens == before.head.tokens - sum(e.tokens for e in folded) + 5

    async def test_drop_removes_the_session(self, store: SessionStore, clock: int, count_tokens: TokenCounter) -> None:
        await self.apply_plan(store, QuestionAsked(envelope(clock), "x1", "q"), 0, clock, count_tokens)
        await store.drop(KEY)
        assert await store.read(KEY) is None

    async def _lines(self, store: SessionStore, clock: int) -> None:
        """Ann's session; her and Bob's lines on the public thread and an automation thread; Bob's session;
        Ann's line on another tenant's public thread."""
        lines = [
            (KEY, Exchange("x1", "ann's own", tokens=3, subject="ann")),
            (ThreadKey.public("castle"), Exchange("p1", "ann asks", tokens=4, subject="ann")),
            (ThreadKey.public("castle"), Exchange("p2", "bob asks", tokens=5, subject="bob")),
            (ThreadKey.automation("castle", "helper"), Exchange("a1", "ann again", tokens=2, subject="ann")),
            (ThreadKey.session("castle", "bob"), Exchange("y1", "bob's own", tokens=6, subject="bob")),
            (ThreadKey.public("castle:2"), Exchange("q1", "the other ann", tokens=1, subject="ann")),
        ]
        writes = [
            SessionWrite(
                Position("threads", 0, offset),
                key,
                SessionChange(exchange, False, exchange.tokens, clock, clock + TTL, count_delta=1),
            )
            for offset, (key, exchange) in enumerate(lines)
        ]
        assert await store.write(writes, clock) == [True] * len(writes)

    async def test_erasing_a_subject_removes_their_session_and_their_lines_on_shared_threads(
        self, store: SessionStore, clock: int
    ) -> None:
        await self._lines(store, clock)
        assert await store.erase_subject("castle", "ann") == {
            "session_exchanges": 1,
            "shared_thread_lines": 2,
            "shared_thread_summaries": 0,
        }
        assert await store.read(KEY) is None
        public = await store.read(ThreadKey.public("castle"))
        assert public is not None and [e.exchange_id for e in public.exchanges] == ["p2"]
        assert (public.head.tokens, public.head.count) == (5, 1)
        automation = await store.read(ThreadKey.automation("castle", "helper"))
        assert automation is not None and automation.exchanges == ()
        assert (automation.head.tokens, automation.head.count) == (0, 0)
        bob = await store.read(ThreadKey.session("castle", "bob"))
        assert bob is not None and [e.exchange_id for e in bob.exchanges] == ["y1"]
        other_tenant = await store.read(ThreadKey.public("castle:2"))
        assert other_tenant is not None and [e.exchange_id for e in other_tenant.exchanges] == ["q1"]
        assert await store.erase_subject("castle", "ann") == {
            "session_exchanges": 0,
            "shared_thread_lines": 0,
            "shared_thread_summaries": 0,
        }

    async def test_an_export_holds_the_session_and_the_subjects_lines_on_shared_threads(
        self, store: SessionStore, clock: int
    ) -> None:
        await self._lines(store, clock)
        exported = await store.export_subject("castle", "ann")
        assert exported["session"] == {
            "summary": "",
            "exchanges": [json.loads(Exchange("x1", "ann's own", tokens=3, subject="ann").to_json())],
        }
        lines = {(line["thread"], line["agent"], line["exchange_id"]) for line in exported["shared_thread_lines"]}
        assert lines == {("public", None, "p1"), ("automation", "helper", "a1")}
        assert all(line["subject"] == "ann" for line in exported["shared_thread_lines"])

    async def test_an_export_of_a_subject_without_a_session_holds_only_their_shared_lines(
        self, store: SessionStore, clock: int
    ) -> None:
        await self._lines(store, clock)
        await store.drop(ThreadKey.session("castle", "bob"))
        exported = await store.export_subject("castle", "bob")
        assert exported["session"] is None
        assert [line["exchange_id"] for line in exported["shared_thread_lines"]] == ["p2"]

    async def _part(self, store: SessionStore, clock: int, asker: str, text: str, offset: int) -> None:
        held = (await store.load([(ThreadKey.public("castle"), "")]))[(ThreadKey.public("castle"), "")][0]
        old = next((segment.tokens for segment in held.segments if segment.asker == asker), 0) if held else 0
        tokens = len(text.split())
        change = SessionChange(
            None, False, tokens - old, clock, clock + TTL, segment=Segment(asker, text, tokens, clock + offset)
        )
        assert await store.write(
            [SessionWrite(Position("threads", 0, offset), ThreadKey.public("castle"), change)], clock
        )

    async def test_a_shared_threads_summary_parts_are_set_replaced_and_dropped_per_asker(
        self, store: SessionStore, clock: int
    ) -> None:
        await self._lines(store, clock)
        await self._part(store, clock, "bob", "bob said two things", 10)
        await self._part(store, clock, "ann", "ann said one", 11)
        public = await store.read(ThreadKey.public("castle"))
        assert public is not None
        assert [(s.asker, s.text, s.tokens) for s in public.head.segments] == [
            ("bob", "bob said two things", 4),
            ("ann", "ann said one", 3),
        ]
        assert public.head.summary_text == "bob said two things\nann said one" and public.head.tokens == 4 + 5 + 4 + 3
        await self._part(store, clock, "bob", "bob in short", 12)
        await self._part(store, clock, "ann", "", 13)
        public = await store.read(ThreadKey.public("castle"))
        assert public is not None
        assert [(s.asker, s.text) for s in public.head.segments] == [("bob", "bob in short")]
        assert public.head.tokens == 4 + 5 + 3

    async def test_erasing_an_asker_removes_their_part_of_a_shared_summary_and_exports_it_first(
        self, store: SessionStore, clock: int
    ) -> None:
        await self._lines(store, clock)
        await self._part(store, clock, "ann", "ann asked about the base", 10)
        await self._part(store, clock, "bob", "bob asked about wood", 11)
        exported = await store.export_subject("castle", "ann")
        assert [(p["thread"], p["agent"], p["summary"]) for p in exported["shared_thread_summaries"]] == [
            ("public", None, "ann asked about the base")
        ]
        assert (await store.erase_subject("castle", "ann"))["shared_thread_summaries"] == 1
        public = await store.read(ThreadKey.public("castle"))
        assert public is not None and [s.asker for s in public.head.segments] == ["bob"]
        assert public.head.tokens == 5 + 4 and "ann" not in public.render()
        assert (await store.export_subject("castle", "ann"))["shared_thread_summaries"] == []

    async def test_erasing_an_asker_whose_lines_all_folded_into_their_part_removes_the_part(
        self, store: SessionStore, clock: int
    ) -> None:
        await self._lines(store, clock)
        public = ThreadKey.public("castle")
        part = Segment("ann", "ann asks, folded", 3, clock)
        fold = SessionChange(None, False, 3 - 4, clock, clock + TTL, remove=("p1",), count_delta=-1, segment=part)
        assert await store.write([SessionWrite(Position("threads", 0, 10), public, fold)], clock) == [True]
        erased = await store.erase_subject("castle", "ann")
        assert (erased["shared_thread_lines"], erased["shared_thread_summaries"]) == (1, 1)  # her automation line
        held = await store.read(public)
        assert held is not None and held.head.segments == () and (held.head.tokens, held.head.count) == (5, 1)

    async def test_what_a_fold_folded_away_is_kept_with_its_summary_and_its_part(
        self, store: SessionStore, clock: int
    ) -> None:
        record = Folded("openai:tiny", 2, 9, clock - 10, clock - 5)
        change = SessionChange(None, False, 1, clock, clock + TTL, summary="s", summary_tokens=1, folded=record)
        assert await store.write([SessionWrite(Position("threads", 0, 1), KEY, change)], clock) == [True]
        held = await store.read(KEY)
        assert held is not None and held.head.folded == record
        notice = held.head.notice(KEY)
        assert notice is not None and notice.folded_exchanges == 2 and held.render(KEY).count("[Lossy ") == 1
        reset = SessionChange(None, True, 0, clock, clock + TTL, summary="")
        assert await store.write([SessionWrite(Position("threads", 0, 2), KEY, reset)], clock) == [True]
        held = await store.read(KEY)
        assert held is not None and held.head.folded is None and held.head.notice(KEY) is None
        public = ThreadKey.public("castle")
        part = Segment("ann", "ann asked", 2, clock, Folded("extractive", 1, 4, clock, clock))
        change = SessionChange(None, False, 2, clock, clock + TTL, segment=part)
        assert await store.write([SessionWrite(Position("threads", 0, 3), public, change)], clock) == [True]
        shared = await store.read(public)
        assert shared is not None and shared.head.segments == (part,)

    async def _ready_agrees(self, store: SessionStore, key: ThreadKey = KEY) -> str:
        """The ready read serves exactly what the session read holds, as the context read serialises it."""
        session, ready = await store.read(key), await store.read_ready(key)
        if session is None:
            assert ready is None
            return ""
        assert ready == ReadyThread.of_session(key, session, ready.version)
        assert json.loads(ready.exchanges_json) == [ready_view(exchange) for exchange in session.exchanges]
        assert json.loads(ready.rendered_json) == session.render(key)
        assert ready.exchange_ids == tuple(exchange.exchange_id for exchange in session.exchanges)
        return ready.version

    async def _change(self, store: SessionStore, offset: int, clock: int, *changes: SessionChange) -> None:
        writes = [SessionWrite(Position("threads", 0, offset + n), KEY, change) for n, change in enumerate(changes)]
        assert await store.write(writes, clock) == [True] * len(writes)
        await self._kept_ready(store)

    async def _kept_ready(self, store: SessionStore) -> None:
        """Where a store keeps the context ready, the write kept it current."""

    async def test_the_ready_context_follows_every_kind_of_write(self, store: SessionStore, clock: int) -> None:
        assert await store.read_ready(KEY) is None
        call = ToolCall(0, "find", '{"chest": "\\u00e9 \\"x\\"", "n": [1, 2.5e20, null]}', '{"ok":true}', True, 12)
        first = Exchange("x1", 'où est "le coffre"?\nici', occurred_at=clock, tokens=3)
        newest = Exchange("x5", "afresh", answer="", tokens=1)
        long_call = ToolCall(0, "t", '{"a": [1, 2]}', '"a long result"', True, 5)
        short_call = ToolCall(0, "t", "1", "2", True, 5)
        later = clock + TTL
        steps = [
            [SessionChange(first, False, 3, clock, later, count_delta=1)],  # new: appended
            [SessionChange(replace(first, tool_calls=(call,)), False, 0, clock, later)],  # the newest: its end
            [
                SessionChange(
                    Exchange("x2", "askx thing", "askx", clock, tokens=1), False, 1, clock, later, count_delta=1
                )
            ],
            [SessionChange(replace(first, tool_calls=(call,), answer="là"), False, 1, clock, later)],  # middle
            [
                SessionChange(Exchange("x3", "third", tokens=1), False, 1, clock, later, count_delta=1),
                SessionChange(
                    Exchange("x2", "askx thing", "askx", clock, (), "done", tokens=2), False, 1, clock, later
                ),
            ],
            [
                SessionChange(
                    None,
                    False,
                    -3,
                    clock,
                    later,
                    remove=("x1",),
                    summary='sum\n"up"',
                    count_delta=-1,
                    folded=Folded("extractive", 1, 3, clock, clock),
                )
            ],  # a fold, with its loss notice
            [  # calls unanswered and failed: their status is the read's, the fragments keep the call
                SessionChange(
                    Exchange(
                        "x6",
                        "tools?",
                        tool_calls=(
                            ToolCall(0, "wait", "{}", "null", True, None, clock),
                            ToolCall(1, "x", "1", "2", False),
                        ),
                        tokens=1,
                    ),
                    False,
                    1,
                    clock,
                    later,
                    count_delta=1,
                )
            ],
            [SessionChange(Exchange("x4", "after the fold", tokens=1), False, 1, clock, later, count_delta=1)],
            [SessionChange(None, True, 0, clock, later, summary="")],  # a reset
            [SessionChange(Exchange("x5", "afresh", tokens=1), False, 1, clock, later, count_delta=1)],
            # the newest again: its text grows while its view shrinks ("answer": null, then ""), then both
            # grow, then both shrink (a call replaced by a shorter one): fragments are rewritten in place
            # only where they grow
            [SessionChange(newest, False, 0, clock, later)],
            [SessionChange(replace(newest, tool_calls=(long_call,)), False, 0, clock, later)],
            [SessionChange(replace(newest, tool_calls=(short_call,)), False, 0, clock, later)],
        ]
        versions = {""}
        offset = 0
        for changes in steps:
            await self._change(store, offset, clock, *changes)
            offset += len(changes)
            version = await self._ready_agrees(store)
            assert version not in versions  # every write makes another version
            versions.add(version)
            assert await self._ready_agrees(store) == version  # and reading changes nothing
        session = await store.read(KEY)
        assert session is not None and [e.exchange_id for e in session.exchanges] == ["x5"]

    async def test_a_served_mark_is_read_with_the_thread_until_its_last_run_ends(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        other = ThreadKey.session("castle", "bob")
        await self.apply_plan(store, QuestionAsked(envelope(clock), "x1", "where?"), 0, clock, count_tokens)
        await self.apply_plan(store, QuestionAsked(envelope(clock), "y1", "who?"), 1, clock, count_tokens, key=other)
        ready = await store.read_ready(KEY)
        assert ready is not None and not ready.served
        await store.mark_served({KEY: _mark(clock - 60_000)})  # its run has ended already: no mark
        assert not (await self._read_ready(store, KEY)).served
        await store.mark_served({KEY: _mark(clock + 600_000)})
        await store.mark_served({KEY: _mark(clock + 600_000)})  # again: idempotent
        await store.mark_served({KEY: _mark(clock + 60_000)})  # an earlier end never shortens it
        await store.mark_served({KEY: _mark(clock - 60_000)})
        assert (await self._read_ready(store, KEY)).served
        assert not (await self._read_ready(store, other)).served  # marks stay with their thread
        await self.apply_plan(store, AnswerGiven(envelope(clock), "x1", "there"), 2, clock, count_tokens)
        assert (await self._read_ready(store, KEY)).served  # writes keep it
        links = served_links((await self._read_ready(store, KEY)).served or b"", clock)
        assert [(link["run_id"], link["expires_at"]) for link in links] == [
            ("r1", clock + 600_000),
            ("r1", clock + 60_000),
        ]  # a link written twice reads as one; an expired one not at all

    async def _read_ready(self, store: SessionStore, key: ThreadKey) -> ReadyThread:
        ready = await store.read_ready(key)
        assert ready is not None
        return ready

    async def test_a_subjects_erasure_takes_their_sessions_served_mark(
        self, store: SessionStore, clock: int, count_tokens: TokenCounter
    ) -> None:
        await self.apply_plan(store, QuestionAsked(envelope(clock), "x1", "where?"), 0, clock, count_tokens)
        await store.mark_served({KEY: _mark(clock + 600_000)})
        await store.erase_subject("castle", "ann")
        await self.apply_plan(store, QuestionAsked(envelope(clock), "x2", "again?"), 1, clock, count_tokens)
        assert not (await self._read_ready(store, KEY)).served

    async def test_served_marks_are_complete_once_recorded(self, store: SessionStore) -> None:
        assert not await store.served_marks_complete()
        await store.complete_served_marks()
        await store.complete_served_marks()
        assert await store.served_marks_complete()

    async def test_the_ready_context_follows_an_erasure_of_lines_on_a_shared_thread(
        self, store: SessionStore, clock: int
    ) -> None:
        await self._lines(store, clock)
        public = ThreadKey.public("castle")
        before = await self._ready_agrees(store, public)
        await store.erase_subject("castle", "ann")
        assert await store.read_ready(KEY) is None
        after = await self._ready_agrees(store, public)
        assert after != before
        ready = await store.read_ready(public)
        assert ready is not None and [e["exchange_id"] for e in json.loads(ready.exchanges_json)] == ["p2"]
