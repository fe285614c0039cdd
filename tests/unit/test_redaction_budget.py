"""Redaction's budget: a detector judges at most `budget(text)` candidates one by one, then redacts the
rest of a text dense with them at once (the worst case of bench/redaction.py stays a few passes in C);
ordinary text, however long, never reaches it. And the Luhn check summed in C is the textbook one."""

from __future__ import annotations

import random
import string
import urllib.parse
import uuid

from hypothesis import given
from hypothesis import strategies as st

from projections.redaction import REDACTED, Redactor
from projections.secret_phrases import budget, elements
from projections.secrets import luhn, unquote

REDACTOR = Redactor.build()


def textbook_luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = int(char) * (2 if index % 2 else 1)
        total += digit - 9 if digit > 9 else digit
    return total % 10 == 0


@given(st.text(alphabet="0123456789", min_size=1, max_size=19))
def test_the_luhn_check_is_the_textbook_one(digits: str) -> None:
    assert luhn(digits) == textbook_luhn(digits)


def test_long_ordinary_text_never_reaches_a_budget() -> None:
    rng = random.Random(34)
    floats = " ".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(60_000))  # an embedding dump, 450 KB
    table = "<table>" + "".join(f"<tr><td>{n}</td><td>item {n}</td></tr>" for n in range(20_000)) + "</table>"
    prose = (
        "Choose a password of twelve characters or more. Never share it with anyone, not even support staff."
        " Change it every ninety days, and keep it out of notes, chats and tickets written in plain text. "
    ) * 3_000  # a name of a secret every 200 characters, for 600 KB
    digests = " ".join(f"{rng.getrandbits(160):040x} {uuid.UUID(int=rng.getrandbits(128))}" for _ in range(10_000))
    for text in (floats, table, prose, digests):
        assert REDACTOR.text(text) == text


def test_a_text_dense_with_candidates_is_redacted_from_where_the_budget_ran_out() -> None:
    card = "4111 1111 1111 1111"
    groups = "4111 " * 20_000 + card  # card-shaped windows every 5 characters, a real card at the end
    redacted = REDACTOR.text(groups)
    assert card not in redacted and redacted.endswith(REDACTED) and redacted.startswith("4111 ")
    names = "password pin code " * 10_000 + "my password is hunter2"
    assert "hunter2" not in REDACTOR.text(names)
    elements = "<password>x" * 10_000 + "<password>hunter2</password>"
    assert "hunter2" not in REDACTOR.text(elements)
    emails = "a@b.co " * 20_000 + "kim@example.com"
    assert "kim@example.com" not in REDACTOR.text(emails)
    rng = random.Random(36)
    alphabet = string.ascii_letters + string.digits
    keys = " ".join("".join(rng.choice(alphabet) for _ in range(32)) for _ in range(5_000))  # a dump of keys
    redacted = REDACTOR.text(keys + " ghp_" + "a1B2" * 9)
    assert "ghp_" not in redacted and redacted.endswith(REDACTED) and len(redacted) < len(keys)


def test_the_budget_grows_with_the_text() -> None:
    assert budget("") == 64 and budget("x" * 786_432) == 64 + 786_432 // 512


PERCENT_PARTS = ["%41", "%e2%82%ac", "%e2%82", "%ZZ", "%4", "%", "a", "é", "/", "%2F", "%ff", "€", "\ud800"]
# what the quoted-printable decoder that does it in C reads specially: '=', soft line breaks, '_', spaces
QP_PARTS = ["=", "=41", "=3D", "%3D", "=\n", "=\r\n", "\n", "\r", " \n", "\t", "_", "%5F", "%0A", "%%41", "%=", "%00"]


@given(st.lists(st.sampled_from(PERCENT_PARTS + QP_PARTS)))
def test_percent_decoding_is_urllibs(parts: list[str]) -> None:
    text = "".join(parts)
    assert unquote(text) == urllib.parse.unquote(text)


SLOW_WALK = Redactor.build(extra_patterns=["(?!)"])  # a pattern that never matches: every key read one by one
KEYS = st.one_of(
    st.sampled_from(["id", "name", "k12x", "item_7", "pw", "p4ssw0rd", "p\u0430ssword", "tokens", "api-key", "x9"]),
    st.sampled_from(["hunter2", "Authorization", "sk_live_abc", "max_tokens", "keyboard", "a.b-c", "ü1", "ke\ny"]),
    st.text(alphabet="abkeypinsw0123_.-", min_size=1, max_size=14),
)
VALUES = st.one_of(
    st.sampled_from(["password", "token", "p4ss", "x", "", "the cat", "4111111111111111", "hunter2"]),
    st.integers(),
    st.none(),
    st.lists(st.sampled_from(["abc", "x-1", "the cat", "sk_live_51Habcdefghijklmnop"]), max_size=3),
)


@given(st.lists(st.dictionaries(KEYS, VALUES, max_size=40), min_size=1, max_size=3))
def test_an_object_whose_keys_are_cleared_at_once_is_redacted_as_key_by_key(objects: list[dict[str, object]]) -> None:
    assert REDACTOR.value(objects) == SLOW_WALK.value(objects)


MARKUP = st.sampled_from(
    [
        *("<password>", "</password>", "<ns:Token>", "<apiKey/>", "<a>", "<td>", "</td>", "<", ">", " ", "x"),
        *("<input ", "<entry ", "<b ", 'type="password"', "TYPE='PassWord'", "name=apiKey", 'key="ordinary"'),
        *("id=pin", 'value="hunter2"', "val=s3cr3t", "for=", '"', "'", "=", "<![CDATA[x<y]]>", "hunter2", "\n"),
        *('<x=" name=password">', '<name="id=password">', "<" + "p" * 70 + ">", "<passwordX" + "y" * 70 + ">"),
    ]
)


@given(st.lists(MARKUP, max_size=24))
def test_the_candidate_tags_find_what_reading_every_tag_finds(parts: list[str]) -> None:
    text = "".join(parts)
    found = sorted(elements(text, REDACTOR.secret_key))
    assert found == sorted(elements(text, REDACTOR.secret_key, every_tag=True))
