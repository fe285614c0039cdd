"""The TraceStore contract, run against every implementation.

The contract suite; the test module test_trace_store.py runs it against each adapter."""

from __future__ import annotations

from typing import Any

from projections.ports import TraceStore
from projections.position import Position
from projections.redaction import Redactor
from projections.session import ThreadKey
from projections.traces import DAY_MS, served_links, trace_document
from schemas.events import Envelope, ModelStep, RunTraced, now_ms
from schemas.limits import INT64_MAX

KEEP_DAYS = 7


# Runs end now, so a server's TTL monitor never deletes one while a test runs; reads take the time.
NOW = now_ms()


def run(
    run_id: str,
    *,
    started_at: int = NOW,
    tenant: str = "castle",
    subject: str = "ann",
    agent: str = "allay",
    status: str = "ok",
    exchange: tuple[str, int | None] | None = None,
    thread: str = "session",
) -> dict[str, Any]:
    env = Envelope(tenant=tenant, subject=subject, agent=agent, thread=thread, producer="test")
    step = ModelStep(0, "small-1", f"prompt of {run_id}", "output", 10, 2, started_at, 5)
    exchange_id, call_index = exchange or (None, None)
    traced = RunTraced(
        env,
        run_id,
        status,
        started_at,
        max(started_at, NOW),
        steps=(step,),
        exchange_id=exchange_id,
        call_index=call_index,
    )
    return trace_document(traced, Redactor.build(), KEEP_DAYS)


class TraceStoreContract:
    async def test_a_stored_run_reads_back(self, traces: TraceStore) -> None:
        doc = run("r1")
        assert await traces.append([doc]) == 1
        assert await traces.get("castle", "r1", NOW) == doc
        assert await traces.get("castle", "r2", NOW) is None

    async def test_a_run_stored_already_is_skipped(self, traces: TraceStore) -> None:
        assert await traces.append([run("r1"), run("r2")]) == 2
        assert await traces.append([run("r1", status="error"), run("r3")]) == 1
        stored = await traces.get("castle", "r1", NOW)
        assert stored is not None and stored["status"] == "ok"

    async def test_an_expired_run_is_not_read(self, traces: TraceStore) -> None:
        doc = run("r1")
        await traces.append([doc])
        assert doc["expires_at"] == NOW + KEEP_DAYS * DAY_MS
        assert await traces.get("castle", "r1", doc["expires_at"] - 1) is not None
        assert await traces.get("castle", "r1", doc["expires_at"]) is None
        assert await traces.recent("castle", doc["expires_at"]) == []

    async def test_recent_runs_come_newest_first_at_most_the_limit(self, traces: TraceStore) -> None:
        await traces.append([run(f"r{n}", started_at=NOW - 1000 * (5 - n)) for n in [3, 1, 4, 2]])
        assert [d["run_id"] for d in await traces.recent("castle", NOW)] == ["r4", "r3", "r2", "r1"]
        assert [d["run_id"] for d in await traces.recent("castle", NOW, limit=2)] == ["r4", "r3"]

    async def test_recent_runs_are_filtered_by_agent_status_and_a_half_open_time_range(
        self, traces: TraceStore
    ) -> None:
        await traces.append(
            [
                run("a-ok", started_at=NOW - 3000),
                run("b-ok", started_at=NOW - 2000, agent="bee"),
                run("a-error", started_at=NOW - 1000, status="error"),
            ]
        )

        async def ids(**query: Any) -> list[str]:
            return [d["run_id"] for d in await traces.recent("castle", NOW, **query)]

        assert await ids(agent="bee") == ["b-ok"]
        assert await ids(status="error") == ["a-error"]
        assert await ids(agent="allay", status="ok") == ["a-ok"]
        assert await ids(since=NOW - 2000) == ["a-error", "b-ok"]
        assert await ids(until=NOW - 2000) == ["a-ok"]
        assert await ids(since=NOW - 2000, until=NOW - 1000) == ["b-ok"]

    async def test_pages_after_a_run_keep_the_order_and_break_ties_by_run_id(self, traces: TraceStore) -> None:
        # five runs in the same millisecond and two older: a page boundary inside the tie drops none
        await traces.append([run(f"t{n}", started_at=NOW - 1000) for n in range(5)])
        await traces.append([run("old1", started_at=NOW - 3000), run("old2", started_at=NOW - 2000)])
        seen: list[str] = []
        before: tuple[int, str] | None = None
        while page := await traces.recent("castle", NOW, limit=2, before=before):
            seen += [d["run_id"] for d in page]
            before = (page[-1]["started_at"], page[-1]["run_id"])
        assert seen == ["t4", "t3", "t2", "t1", "t0", "old2", "old1"]

    async def test_tenants_stay_apart(self, traces: TraceStore) -> None:
        await traces.append([run("r1"), run("r1", tenant="castle:2", status="error")])
        mine, theirs = await traces.get("castle", "r1", NOW), await traces.get("castle:2", "r1", NOW)
        assert mine is not None and theirs is not None
        assert (mine["status"], theirs["status"]) == ("ok", "error")
        assert [d["tenant"] for d in await traces.recent("castle", NOW)] == ["castle"]

    async def test_erasing_a_subject_deletes_only_their_runs(self, traces: TraceStore) -> None:
        await traces.append([run("r1"), run("r2"), run("r3", subject="bob"), run("r4", tenant="castle:2")])
        assert sorted(d["run_id"] for d in await traces.export_subject("castle", "ann")) == ["r1", "r2"]
        assert await traces.erase_subject("castle", "ann") == 2
        assert await traces.export_subject("castle", "ann") == []
        assert await traces.get("castle", "r1", NOW) is None
        assert await traces.get("castle", "r3", NOW) is not None
        assert await traces.get("castle:2", "r4", NOW) is not None

    async def test_an_export_holds_each_run_whole(self, traces: TraceStore) -> None:
        doc = run("r1")
        await traces.append([doc])
        assert await traces.export_subject("castle", "ann") == [doc]

    async def test_runs_that_served_exchanges_are_found_by_thread_and_exchange(self, traces: TraceStore) -> None:
        await traces.append(
            [
                run("r1", exchange=("x1", 0)),
                run("r2", exchange=("x1", None), started_at=NOW - 5),
                run("r3", exchange=("x2", 1)),
                run("r4", exchange=("x1", 0), subject="bob"),  # another thread's exchange of the same id
                run("r5", exchange=("x1", 0), thread="public"),
                run("r6", exchange=("x1", 0), tenant="castle:2"),
                run("r7"),  # served no exchange
            ]
        )
        found = await traces.served("castle", "session:ann", ["x1", "x9"], NOW)
        assert sorted((d["run_id"], d["exchange_id"], d["call_index"]) for d in found) == [
            ("r1", "x1", 0),
            ("r2", "x1", None),
        ]
        assert {d["started_at"] for d in found} == {NOW, NOW - 5}
        assert [d["run_id"] for d in await traces.served("castle", "public", ["x1"], NOW)] == ["r5"]
        assert await traces.served("castle", "session:ann", [], NOW) == []
        expires = run("r1")["expires_at"]
        assert await traces.served("castle", "session:ann", ["x1"], expires) == []

    async def test_the_threads_unexpired_runs_serve_are_listed_with_their_last_end(self, traces: TraceStore) -> None:
        await traces.append(
            [
                run("r1", exchange=("x1", 0)),
                run("r2", started_at=NOW - DAY_MS, exchange=("x2", None)),
                run("r3", exchange=("x3", None), thread="public"),
                run("r4", exchange=("x4", None), thread="automation", tenant="forge"),
                run("r5"),  # served no exchange
                run("r6", subject="bob", exchange=("x6", None)),
            ]
        )
        served = await traces.served_threads(NOW)
        until = NOW + KEEP_DAYS * DAY_MS  # every run here ends now
        assert {key: mark.until_ms for key, mark in served.items()} == {
            ThreadKey.session("castle", "ann"): until,
            ThreadKey.public("castle"): until,
            ThreadKey.automation("forge", "allay"): until,
            ThreadKey.session("castle", "bob"): until,
        }
        links = served_links(served[ThreadKey.session("castle", "ann")].links, NOW)
        assert sorted((link["run_id"], link["exchange_id"], link["call_index"]) for link in links) == [
            ("r1", "x1", 0),
            ("r2", "x2", None),
        ]
        assert await traces.served_threads(until) == {}  # all expired by then

    async def test_a_run_ending_at_the_end_of_int64_is_stored_and_kept(self, traces: TraceStore) -> None:
        env = Envelope(tenant="castle", subject="ann", agent="allay", thread="session", producer="test")
        last = RunTraced(env, "r-end", "ok", NOW, INT64_MAX, exchange_id="x1")
        doc = trace_document(last, Redactor.build(), KEEP_DAYS)
        assert doc["expires_at"] == INT64_MAX
        assert await traces.append([doc]) == 1
        assert await traces.get("castle", "r-end", NOW) == doc
        served = await traces.served_threads(NOW)
        assert {key: mark.until_ms for key, mark in served.items()} == {ThreadKey.session("castle", "ann"): INT64_MAX}

    async def test_checkpoints_only_move_forward(self, traces: TraceStore) -> None:
        assert await traces.applied("traces", 1) == -1
        await traces.advance(Position("traces", 1, 9))
        await traces.advance(Position("traces", 1, 3))
        assert await traces.applied("traces", 1) == 9
        assert await traces.applied("traces", 0) == -1
