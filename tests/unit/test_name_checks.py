"""Names are checked once, at the use case's entry (issue 39, "each rule stated once"): the faces (API
routers, the MCP endpoint, the CLI) pass the names they were given down, and a bad one is refused,
naming its field, before the use case claims an idempotency key, waits for `after` or writes anything."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from memlog.adapters.in_memory import (
    InMemoryConversationArchive,
    InMemoryFactSlots,
    InMemoryFactStore,
    InMemoryIdempotency,
)
from memlog.app.claims import Claims
from memlog.app.conversations import Conversations, ready_ref
from memlog.app.memory import Memory, agent_names
from memlog.app.search import CrossSearch
from projections.cursors import Cursors
from projections.facts import FactPolicy
from projections.session import ThreadPolicy
from schemas.errors import InvalidEvent
from tests.conftest import base_settings
from tests.unit.log import world

ROOT = Path(__file__).resolve().parents[2]
BAD = ("", "x" * 201, "a\x01b", "bell\x07")  # empty, too long, control characters
CURSORS = Cursors(b"k" * 32)


def test_no_face_checks_a_name_itself() -> None:
    """The rule is stated in schemas/envelope.py; memlog applies it in its use cases (memlog/app) only."""
    calls = re.compile(r"\bcheck_name\(")
    outside = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "memlog").rglob("*.py"))
        if path.relative_to(ROOT / "memlog").parts[0] != "app"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if calls.search(line)
    ]
    assert outside == []


class Waits:
    """A `ready` that records whether the use case waited."""

    def __init__(self) -> None:
        self.waited = 0

    async def __call__(self) -> None:
        self.waited += 1


def refused(caught: pytest.ExceptionInfo[InvalidEvent]) -> str:
    return caught.value.field


@pytest.mark.parametrize("bad", BAD)
async def test_a_bad_name_claims_no_key_and_writes_nothing(bad: str) -> None:
    store = InMemoryIdempotency(3600)
    claims = Claims(store, 1.0)
    written: list[int] = []

    async def write() -> dict[str, Any]:
        written.append(1)
        return {"ok": True}

    for field, names in (
        ("tenant", (("tenant", bad), ("subject", "ada"))),
        ("subject", (("tenant", "castle"), ("subject", bad))),
        ("agent", (("tenant", "castle"), ("subject", "ada"), ("agent", bad))),
    ):
        owner = bad if field == "subject" else "ada"
        with pytest.raises(InvalidEvent) as caught:
            await claims.run(names, ("castle", "facts", owner), ("key-1", None), owner, {}, write, "a fact")
        assert refused(caught) == field
        assert await store.reserve("castle", "facts", owner, "key-1", owner) is None  # the key was free
        await store.release("castle", "facts", owner, "key-1")
    assert written == []


async def test_a_bad_name_is_named_before_a_bad_key() -> None:
    """As the routers checked: the path's names first, then the idempotency key."""
    claims = Claims(InMemoryIdempotency(3600), 1.0)

    async def write() -> dict[str, Any]:
        raise AssertionError("nothing is written")

    with pytest.raises(InvalidEvent) as caught:
        await claims.run((("tenant", "a\x01"),), ("a\x01", "knowledge", ""), ("k1", "k2"), None, {}, write)
    assert refused(caught) == "tenant"
    with pytest.raises(InvalidEvent) as caught:
        await claims.run((("tenant", "castle"),), ("castle", "knowledge", ""), ("k1", "k2"), None, {}, write)
    assert refused(caught) == "idempotency_key"


def memory() -> tuple[Memory, Any]:
    w = world(base_settings(), ThreadPolicy())
    facts = Memory(w.log, InMemoryFactStore(), FactPolicy(), "test", slots=InMemoryFactSlots(), cursors=CURSORS)
    return facts, w.log


@pytest.mark.parametrize("bad", BAD)
async def test_a_bad_name_waits_for_nothing_and_writes_nothing(bad: str) -> None:
    facts, log = memory()
    reads = [
        ("tenant", lambda ready: facts.facts(bad, "ada", None, ready=ready)),
        ("subject", lambda ready: facts.facts("castle", bad, None, ready=ready)),
        ("agent", lambda ready: facts.facts("castle", None, bad, ready=ready)),
        ("agent", lambda ready: facts.search("castle", "ada", "tea", bad, ready=ready)),
        ("subject", lambda ready: facts.revise("castle", bad, "f1", "tea", None, ready=ready)),
        ("tenant", lambda ready: facts.revise(bad, None, "f1", "tea", None, ready=ready)),
        ("subject", lambda ready: facts.forget_everywhere("castle", bad, "f1", None, ready=ready)),
        ("tenant", lambda ready: facts.forget(bad, None, "f1", None, ready=ready)),
    ]
    for field, call in reads:
        ready = Waits()
        with pytest.raises(InvalidEvent) as caught:
            await call(ready)
        assert (refused(caught), ready.waited) == (field, 0)
    for field, write in (
        ("subject", facts.clear("castle", bad)),
        ("agent", facts.run_tool("castle", "ada", bad, "remember", {"text": "tea"})),
    ):
        with pytest.raises(InvalidEvent) as caught:
            await write
        assert refused(caught) == field
    assert log.records == []


async def test_a_good_name_waits_once_then_reads() -> None:
    facts, _ = memory()
    ready = Waits()
    assert await facts.facts("castle", "ada", "helper", ready=ready) == []
    assert ready.waited == 1


@pytest.mark.parametrize("bad", BAD)
async def test_the_archive_reads_check_the_conversation_before_they_wait(bad: str) -> None:
    threads = Conversations(InMemoryConversationArchive(), None, "test", cursors=CURSORS)
    for read in (
        lambda ready: threads.search("castle", "session", "ada", "tea", conversation=bad, ready=ready),
        lambda ready: threads.calendar("castle", "session", "ada", conversation=bad, ready=ready),
    ):
        ready = Waits()
        with pytest.raises(InvalidEvent) as caught:
            await read(ready)
        assert (refused(caught), ready.waited) == ("conversation", 0)
    with pytest.raises(InvalidEvent) as caught:
        await threads.retention(bad, base_settings().retention_policy(), 0)
    assert refused(caught) == "tenant"


@pytest.mark.parametrize("bad", BAD)
def test_the_mcp_binding_names_each_bad_name(bad: str) -> None:
    for field, names in (("tenant", (bad, "ada", "helper")), ("subject", ("castle", bad, "helper"))):
        with pytest.raises(InvalidEvent) as caught:
            agent_names(*names)
        assert refused(caught) == field
    with pytest.raises(InvalidEvent) as caught:
        agent_names("castle", "ada", bad)
    assert refused(caught) == "agent"
    assert agent_names("castle", "ada", "helper") == ("castle", "ada", "helper")


@pytest.mark.parametrize("bad", BAD)
async def test_the_archive_routes_check_their_names_before_they_wait(bad: str) -> None:
    """The conversation routes' one step (ready_ref) and the searches across threads."""
    for field, names in (
        ("tenant", (bad, "session:ann", "main")),
        ("thread", ("castle", f"session:{bad}", "main")),
        ("conversation", ("castle", "session:ann", bad)),
    ):
        ready = Waits()
        with pytest.raises(InvalidEvent) as caught:
            await ready_ref(*names, ready=ready)
        assert (refused(caught), ready.waited) == (field, 0)
    archive = InMemoryConversationArchive()
    across = CrossSearch(archive, archive, cursors=CURSORS)
    for field, search in (
        ("agent", lambda ready: across.agent("castle", bad, "tea", ready=ready)),
        ("tenant", lambda ready: across.agent(bad, "helper", "tea", ready=ready)),
        ("tenant", lambda ready: across.tenant(bad, "tea", ready=ready)),
    ):
        ready = Waits()
        with pytest.raises(InvalidEvent) as caught:
            await search(ready)
        assert (refused(caught), ready.waited) == (field, 0)


async def test_a_good_conversation_is_named_once_the_wait_is_over() -> None:
    ready = Waits()
    ref = await ready_ref("castle", "session:ann", "main", ready=ready)
    assert (ref.tenant, ref.thread, ref.owner, ref.conversation, ready.waited) == (
        "castle",
        "session",
        "ann",
        "main",
        1,
    )
