"""What the projections can keep, checked where a value enters memlog so nothing accepted is lost later.

- MongoDB refuses a BSON document nested past 100 levels (mongod's maximum BSON depth), an integer
  outside int64 (BSON has no wider integer) and a string that is not UTF-8 (BSON strings are UTF-8).
- The context read serialises a session's tool calls with pydantic-core, which stops at a nesting
  depth well under 255; an archived entry sits a few levels deep in its MongoDB document.
- Avro `long` is int64 and Avro `int` (a tool call's `call_index`, a run step's `seq`) is int32.
- JSON has no NaN or Infinity; Python's json module reads and writes them unless told not to.

So a JSON value (a request body, a tool call's arguments or result) is refused when it nests deeper
than MAX_JSON_DEPTH, holds an integer outside int64, or a number that is not finite. A lone surrogate
(valid in a JSON escape, not in UTF-8) is refused too, except where memlog keeps the text as received
(an exchange's `original`) and stores U+FFFD in the structured copy (schemas.exchanges.encodable).
Pure: no I/O; one pass over the value, linear in its size, no recursion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from schemas.errors import InvalidEvent

# Well under MongoDB's 100 (an entry's arguments sit inside its document) and pydantic-core's serializer
# limit; deep enough for any tool payload seen in practice. Counted in containers: {"a": [1]} is 2.
MAX_JSON_DEPTH = 64
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

LONE_SURROGATE = "holds a lone surrogate (\\ud800 to \\udfff), which UTF-8 cannot encode"

JsonPath = tuple[str | int, ...]
CONTAINERS = (dict, list, tuple)  # json.dumps writes a tuple as a list


@dataclass(frozen=True)
class JsonProblem:
    """Where in a value the first thing a store cannot keep sits, and what it is."""

    path: JsonPath
    problem: str


def encodes_as_utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _leaf_problem(value: object, check_text: bool) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if INT64_MIN <= value <= INT64_MAX else f"is an integer outside int64 ({INT64_MIN} to {INT64_MAX})"
    if isinstance(value, float):
        return None if math.isfinite(value) else "is not a finite number (NaN and Infinity are not JSON)"
    if isinstance(value, str) and check_text and not encodes_as_utf8(value):
        return LONE_SURROGATE
    return None


def _keepable(value: Any, max_depth: int, check_text: bool) -> bool:
    """The fast pass: whether every part of the value can be kept (no path kept; about half the cost
    of the json.loads that made the value)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth >= max_depth:
            return False
        if type(node) is dict:
            if check_text and not all(encodes_as_utf8(key) for key in node):
                return False
            items: Any = node.values()
        else:
            items = node
        for item in items:
            kind = type(item)
            if kind is str:
                if check_text and not encodes_as_utf8(item):
                    return False
            elif kind is int:
                if item > INT64_MAX or item < INT64_MIN:
                    return False
            elif kind is dict or kind is list or kind is tuple:
                push((item, depth + 1))
            elif kind is float:
                if not math.isfinite(item):
                    return False
            elif kind is not bool and item is not None and _leaf_problem(item, check_text) is not None:
                return False  # a subclass of int, float or str from a Python caller
    return True


def _locate(value: Any, max_depth: int, check_text: bool) -> JsonProblem | None:
    """The slow pass, run only once the fast one found something: where it is."""
    stack: list[tuple[Any, JsonPath]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if len(path) >= max_depth:
            return JsonProblem(path, f"is nested deeper than {max_depth} levels")
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in items:
            if check_text and isinstance(key, str) and not encodes_as_utf8(key):
                return JsonProblem((*path, key), LONE_SURROGATE)
            if isinstance(item, CONTAINERS):
                stack.append((item, (*path, key)))
                continue
            problem = _leaf_problem(item, check_text)
            if problem is not None:
                return JsonProblem((*path, key), problem)
    return None


def json_problem(value: Any, *, max_depth: int = MAX_JSON_DEPTH, lone_surrogates: bool = False) -> JsonProblem | None:
    """The first thing in a parsed JSON value that the stores cannot keep, or None.

    `lone_surrogates`: True where the caller keeps them the documented way (U+FFFD in the structured
    copy, the raw text as received beside it); False refuses them.
    """
    check_text = not lone_surrogates
    if not isinstance(value, CONTAINERS):
        problem = _leaf_problem(value, check_text)
        return None if problem is None else JsonProblem((), problem)
    if _keepable(value, max_depth, check_text):
        return None
    return _locate(value, max_depth, check_text)


def field_name(field: str, path: JsonPath) -> str:
    """`tool_calls[0].arguments` style, as every refusal names its field."""
    name = field
    for step in path:
        name = f"{name}[{step}]" if isinstance(step, int) else (f"{name}.{step}" if name else str(step))
    return name


def check_json(field: str, value: Any, *, lone_surrogates: bool = True) -> None:
    """Raise InvalidEvent naming the place in `value` that the stores cannot keep."""
    found = json_problem(value, lone_surrogates=lone_surrogates)
    if found is not None:
        raise InvalidEvent(field_name(field, found.path), found.problem)


def check_int(field: str, value: object, *, high: int = INT64_MAX) -> int:
    """A non-negative integer an Avro `long` (or, with high=INT32_MAX, an `int`) can carry."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise InvalidEvent(field, f"must be an integer from 0 to {high}")
    return value


def check_utf8(field: str, text: str) -> str:
    """Text with no lone surrogate: for fields kept without an original to fall back on (a fact's text)."""
    if not encodes_as_utf8(text):
        raise InvalidEvent(field, LONE_SURROGATE)
    return text
