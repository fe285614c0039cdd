"""The tool results a fold keeps: newest per tool and arguments, bounded, carried across folds."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from projections.session import Exchange, ToolCall
from projections.summary import extractive_summary
from projections.tool_results import (
    HEADING,
    RESULT_CHARS,
    join_summary,
    merge_tool_lines,
    section_budget,
    split_summary,
)


def _exchange(number: int, *calls: tuple[str, object, object]) -> Exchange:
    tool_calls = tuple(
        ToolCall(index, name, json.dumps(arguments), json.dumps(result), True)
        for index, (name, arguments, result) in enumerate(calls)
    )
    return Exchange(f"x{number}", f"question {number}", tool_calls=tool_calls, answer=f"answer {number}")


def _fold(previous: str, folded: list[Exchange], limit: int = 3_000) -> str:
    prose, lines = split_summary(previous)
    kept = merge_tool_lines(lines, folded, section_budget(limit))
    return join_summary(extractive_summary(prose, folded, limit - 400), kept, limit)


def test_a_folded_tool_result_is_kept_with_its_name_and_call_index() -> None:
    summary = _fold("", [_exchange(1, ("open_chest", {"chest": "oak"}, {"items": ["silver key", "map"]}))])
    assert HEADING in summary
    assert '- open_chest({"chest":"oak"}) → call 0 ok: {"items":["silver key","map"]}' in summary


def test_the_newest_result_per_tool_and_arguments_replaces_the_older() -> None:
    first = _fold("", [_exchange(1, ("open_chest", {"chest": "oak"}, {"items": ["silver key"]}))])
    second = _fold(first, [_exchange(2, ("open_chest", {"chest": "oak"}, {"items": []}))])
    _, lines = split_summary(second)
    assert lines == ['- open_chest({"chest":"oak"}) → call 0 ok: {"items":[]}']


def test_other_arguments_keep_their_own_line_across_folds() -> None:
    first = _fold("", [_exchange(1, ("open_chest", {"chest": "oak"}, {"items": ["silver key"]}))])
    second = _fold(first, [_exchange(2, ("open_chest", {"chest": "iron"}, {"items": ["rope"]}))])
    assert "silver key" in second and "rope" in second


def test_a_long_result_is_cut_to_its_excerpt() -> None:
    summary = _fold("", [_exchange(1, ("read_book", {"page": 1}, {"text": "word " * 500}))])
    (line,) = split_summary(summary)[1]
    assert len(line.partition("ok: ")[2]) == RESULT_CHARS


def test_the_oldest_results_go_first_when_the_section_is_full() -> None:
    folded = [_exchange(n, ("weather", {"day": n}, {"sky": f"clear {n}"})) for n in range(40)]
    summary = _fold("", folded)
    assert "clear 39" in summary and '"sky":"clear 0"' not in summary


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "tool → x"]), st.text(max_size=300), st.text(max_size=300)),
        max_size=30,
    ),
    st.integers(min_value=200, max_value=3_000),
)
def test_a_summary_never_exceeds_its_limit(calls: list[tuple[str, str, str]], limit: int) -> None:
    summary = ""
    for number, call in enumerate(calls):
        summary = _fold(summary, [_exchange(number, call)], limit)
        assert len(summary) <= limit


def test_memory_tools_stay_out_of_the_section() -> None:
    summary = _fold("", [_exchange(1, ("remember", {"text": "my base is at 120 64"}, {"fact_id": "f1"}))])
    assert "120 64" not in summary and HEADING not in summary
