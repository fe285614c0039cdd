"""The context routes' shortcut decides as FastAPI would: the paths it claims are exactly those the context
routes match and no other route does, and the query it reads is what Starlette and FastAPI would give
the route (memlog/api/shortcut.py)."""

from __future__ import annotations

import math
import re
from typing import Annotated

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter, ValidationError
from starlette.datastructures import QueryParams

from memlog.api.app import create_api
from memlog.api.shortcut import SESSION, THREAD, plain_query, route
from memlog.config.settings import Settings

WAIT: TypeAdapter[float] = TypeAdapter(Annotated[float, Field(ge=0, allow_inf_nan=False)])


def _get_templates() -> list[tuple[str, re.Pattern[str]]]:
    paths = create_api(Settings()).openapi()["paths"]
    return [
        (path, re.compile("^" + re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(path)) + "$"))
        for path, operations in paths.items()
        if "get" in operations
    ]


TEMPLATES = _get_templates()
CONTEXTS = {path for path, _ in TEMPLATES if path.endswith("/context")}
SEGMENT = st.one_of(
    st.sampled_from(["", "public", "subjects", "agents", "context", "search", "runs", "facts", "a:b", "%2F"]),
    st.sampled_from(["a/b", "x/context", "subjects/s"]),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=6),
)


def test_the_context_routes_are_the_three_it_knows() -> None:
    assert len(CONTEXTS) == 3
    for template in CONTEXTS:
        example = template.replace("{tenant}", "t").replace("{subject}", "s").replace("{agent}", "a")
        found = route(example)
        assert found is not None and found.template == template and found.tenant == "t"


def _filled(template: str, values: list[str]) -> str:
    for value in values:
        template = re.sub(r"\{[a-z_]+\}", lambda _, value=value: value, template, count=1)
    return template


PATHS = st.one_of(
    st.builds(
        lambda segments, ending: "/v1/tenants/" + "/".join(segments) + ("/context" if ending else ""),
        st.lists(SEGMENT, max_size=5),
        st.booleans(),
    ),
    st.builds(
        _filled,
        st.one_of(st.sampled_from(sorted(CONTEXTS)), st.sampled_from([path for path, _ in TEMPLATES])),
        st.lists(SEGMENT, min_size=4, max_size=4),
    ),
)


@given(PATHS)
@example("/v1/tenants/t/agents/a/b/context")
@example("/v1/tenants//public/context")
@example("/v1/tenants/t/subjects/s/context/context")
def test_it_claims_a_path_exactly_when_a_context_route_is_the_only_match(path: str) -> None:
    matched = [template for template, pattern in TEMPLATES if pattern.match(path)]
    found = route(path)
    if found is None:
        assert not CONTEXTS & set(matched), (path, matched)
    else:
        assert matched == [found.template], (path, matched)
        assert found.tenant == path.split("/")[3]


VALUE = st.one_of(st.text(max_size=8), st.sampled_from(["", "0", "1.5", "-1", "1e3", "recent", "a&b=c", "%20"]))


@given(st.lists(st.tuples(st.sampled_from(["after", "wait", "fill", "other"]), VALUE), max_size=6))
def test_the_query_it_reads_is_the_one_fastapi_gives_the_route(pairs: list[tuple[str, str]]) -> None:
    raw = str(QueryParams(pairs)).encode("latin-1")
    for names in (SESSION, THREAD):
        parsed = plain_query(raw, names)
        given_names = [name for name, _ in pairs if name in names]
        if parsed is None:
            wait, fill = dict(pairs).get("wait"), dict(pairs).get("fill")
            assert len(set(given_names)) < len(given_names) or fill not in (None, "recent") or wait is not None
            continue
        query, wait = parsed
        params = QueryParams(raw.decode("latin-1"))
        assert query == {name: params[name] for name in names if name in params}
        if "wait" in query:
            assert wait == WAIT.validate_python(query["wait"])
        else:
            assert wait is None


@pytest.mark.parametrize(
    "text", ["0", "1", "0.5", "30", "999999999.999999999", "-1", "1e3", "nan", "inf", "", " 1", "1.", ".5", "9" * 400]
)
def test_a_wait_it_takes_is_one_fastapi_takes_alike(text: str) -> None:
    parsed = plain_query(b"wait=" + text.encode(), THREAD)
    if parsed is None:
        return  # left to FastAPI, which answers it itself
    try:
        expected = WAIT.validate_python(text)
    except ValidationError:
        pytest.fail(f"wait={text!r} taken, though FastAPI refuses it")
    assert parsed[1] == expected and math.isfinite(expected)
