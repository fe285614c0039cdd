"""Frozen dataclasses with `schemas.frozen.quick`'s `__init__` (issue 16: a replay builds several per event) are
the very values the generated `__init__` builds: same fields, defaults, factories, `__post_init__` checks,
equality, hash and pickling, and they stay frozen. And an event read back from its Avro record is the event."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from typing import Any

import pytest
from hypothesis import given, settings

from projections.position import Position
from projections.session import Exchange, SessionChange, SessionHead, SessionWrite, ToolCall
from schemas.errors import InvalidEvent
from schemas.events import EVENT_TYPES, Envelope, ThreadEvent, ToolCalled, check_name, from_record, to_record
from schemas.frozen import quick
from tests.unit.strategies import thread_events

QUICK = [Envelope, *EVENT_TYPES.values(), Exchange, ToolCall, SessionChange, SessionHead, SessionWrite, Position]


@pytest.mark.parametrize("cls", QUICK, ids=lambda cls: cls.__name__)
def test_the_quick_init_keeps_the_generated_signature(cls: type[Any]) -> None:
    assert cls.__init__.__code__.co_filename.startswith("<quick ")
    fields = dataclasses.fields(cls)
    annotations = {f.name: f.type for f in fields}
    namespace = {"__annotations__": annotations, **_defaults(cls)}
    plain = dataclasses.dataclass(frozen=True)(type(cls.__name__, (), namespace))
    assert str(inspect.signature(cls)) == str(inspect.signature(plain))


def _defaults(cls: type[Any]) -> dict[str, Any]:
    return {
        f.name: dataclasses.field(default=f.default, default_factory=f.default_factory)  # type: ignore[call-overload]
        for f in dataclasses.fields(cls)
    }


@given(thread_events())
@settings(max_examples=300, deadline=None)
def test_an_event_read_from_its_record_is_the_event_the_generated_init_builds(event: ThreadEvent) -> None:
    record = to_record(event)
    read = from_record(event.TYPE, record)
    assert read == event
    assert read.__dict__ == event.__dict__
    assert read.envelope.__dict__ == event.envelope.__dict__
    assert hash(read.envelope) == hash(event.envelope)
    assert pickle.loads(pickle.dumps(read)) == read
    slow = object.__new__(type(event))  # the generated way: every field through object.__setattr__
    for field in dataclasses.fields(event):
        object.__setattr__(slow, field.name, getattr(event, field.name))
    assert slow == read


def test_defaults_factories_and_checks_run_as_generated() -> None:
    env = Envelope(tenant="t", thread="session", producer="p", subject="s")
    assert env.event_id and env.occurred_at > 0 and env.agent is None  # factories and defaults
    assert Envelope(tenant="t", thread="session", producer="p", subject="s").event_id != env.event_id
    with pytest.raises(InvalidEvent):
        Envelope(tenant="t", thread="session", producer="p")  # __post_init__: a session event needs its subject
    with pytest.raises(InvalidEvent):
        ToolCalled(env, "x", 0, "tool", "{not json", "null")
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.tenant = "other"  # type: ignore[misc]
    assert dataclasses.replace(env, tenant="u").tenant == "u"


def test_only_frozen_dataclasses_without_slots_are_made_quick() -> None:
    @dataclasses.dataclass
    class Plain:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    for cls in (Plain, Slotted):
        with pytest.raises(TypeError):
            quick(cls)


@pytest.mark.parametrize("name", ["bench", "player-0001", "a b", "é", "日本"])
def test_printable_names_pass(name: str) -> None:
    assert check_name("subject", name) == name


@pytest.mark.parametrize("name", ["a\x00", "a\x1f", "\x7f", "a\n", "a\u0085", "a\ud800"])
def test_control_characters_are_refused_ascii_or_not(name: str) -> None:
    with pytest.raises(InvalidEvent):
        check_name("subject", name)
