"""What the stores can keep: JSON depth, int64, finite numbers, UTF-8; checked where a value enters."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.errors import InvalidEvent
from schemas.events import Envelope, ModelStep, RunTraced, ToolCalled, json_text, to_record
from schemas.exchanges import ReportedExchange, exchange_events
from schemas.limits import INT32_MAX, INT64_MAX, INT64_MIN, MAX_JSON_DEPTH, check_json, json_problem

ENVELOPE = Envelope(tenant="t", subject="s", thread="session", producer="p")


def nested(depth: int) -> Any:
    """`depth` containers, alternating objects and arrays."""
    value: Any = 1
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(INT64_MIN, INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=40,
)


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_every_json_value_within_the_limits_is_kept(value: Any) -> None:
    assert json_problem(value) is None
    assert json.loads(json_text("arguments", value)) == value


@given(st.integers(INT64_MAX + 1) | st.integers(max_value=INT64_MIN - 1), st.integers(0, 5))
@settings(max_examples=100, deadline=None)
def test_an_integer_outside_int64_is_refused_wherever_it_sits(number: int, depth: int) -> None:
    value: Any = number
    for _ in range(depth):
        value = {"n": [value]}
    found = json_problem(value)
    assert found is not None and "int64" in found.problem
    assert found.path == ("n", 0) * depth


def test_the_depth_limit_counts_containers() -> None:
    assert json_problem(nested(MAX_JSON_DEPTH)) is None
    found = json_problem(nested(MAX_JSON_DEPTH + 1))
    assert found is not None and found.problem == f"is nested deeper than {MAX_JSON_DEPTH} levels"
    assert len(found.path) == MAX_JSON_DEPTH


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_refused(number: float) -> None:
    with pytest.raises(InvalidEvent) as refused:
        check_json("arguments", {"x": [number]})
    assert refused.value.field == "arguments.x[0]" and "finite" in refused.value.problem


def test_lone_surrogates_are_refused_only_where_no_original_is_kept() -> None:
    for value in ({"x": "a\ud800"}, {"a\udc00": 1}, ["\udfff"]):
        assert json_problem(value, lone_surrogates=True) is None
        found = json_problem(value)
        assert found is not None and "surrogate" in found.problem


def test_a_tool_call_read_from_the_log_is_refused_when_nested_past_the_limit() -> None:
    # what a producer other than memlog's own may put on the topic: invalid, so dead-lettered, never stored
    for depth in (MAX_JSON_DEPTH + 1, 5000):
        text = "[" * depth + "]" * depth
        with pytest.raises(InvalidEvent) as refused:
            ToolCalled(ENVELOPE, "x1", 0, "tool", text, "null")
        assert refused.value.field.startswith("arguments")
    ToolCalled(ENVELOPE, "x1", 0, "tool", json.dumps(nested(MAX_JSON_DEPTH)), "null")


def test_avro_int_fields_stop_at_int32() -> None:
    with pytest.raises(InvalidEvent) as refused:
        ToolCalled(ENVELOPE, "x1", INT32_MAX + 1, "tool", "{}", "null")
    assert refused.value.field == "call_index"
    step = ModelStep(INT32_MAX + 1, "m", "p", "o", 1, 1, 1, 1)
    with pytest.raises(InvalidEvent) as refused:
        RunTraced(ENVELOPE, "r1", "ok", 1, 2, (step,))
    assert refused.value.field == "steps[0].seq"


def test_the_codec_names_the_event_of_a_long_past_int64() -> None:
    step = ModelStep(0, "m", "p", "o", INT64_MAX + 1, 1, 1, 1)
    with pytest.raises(InvalidEvent) as refused:
        Codec(Catalog()).encode(RunTraced.TYPE, to_record(RunTraced(ENVELOPE, "r1", "ok", 1, 2, (step,))))
    assert refused.value.field == RunTraced.TYPE


def test_an_empty_exchange_id_is_refused_by_name_whichever_way_the_exchange_comes() -> None:
    payload = {"tenant": "t", "subject": "s", "question": "q", "answer": "a", "exchange_id": ""}
    with pytest.raises(InvalidEvent) as refused:
        exchange_events(ReportedExchange.from_payload(payload), producer="test")
    assert refused.value.field == "exchange_id"
    given_none = exchange_events(ReportedExchange.from_payload({**payload, "exchange_id": None}), producer="test")
    assert given_none[0].exchange_id  # absent: memlog gives one
