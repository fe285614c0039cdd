"""A refusal always encodes, whatever it quotes of what it was sent."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memlog.api.handlers import ECHO_CHARS, Refusal

quoted = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities included
    | st.text(st.characters(exclude_categories=()))  # lone surrogates included
    | st.binary(),  # not UTF-8 either
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=30,
)


@given(quoted)
@settings(max_examples=300, deadline=None)
def test_a_refusal_encodes_whatever_it_quotes(value: Any) -> None:
    body = Refusal({"detail": [{"loc": ["body"], "msg": "refused", "input": value}]}, status_code=422).body
    assert json.loads(body)["detail"][0]["msg"] == "refused"
    assert body.isascii()


def test_a_long_quote_is_cut_short() -> None:
    body = json.loads(Refusal({"detail": [{"input": "x" * 100_000}]}, status_code=422).body)
    assert len(body["detail"][0]["input"]) == ECHO_CHARS + 3
