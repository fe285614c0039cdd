"""Redaction's budget: a detector judges at most `budget(text)` candidates one by one, then redacts the
rest of a text dense with them at once (the worst case of bench/redaction.py stays a few passes in C);
ordinary text, however long, never reaches it. And the Luhn check summed in C is the textbook one."""

from __future__ import annotations

import base64
import random
import re
import string
import urllib.parse
import uuid

from hypothesis import example, given
from hypothesis import strategies as st

from projections.redaction import REDACTED, Redactor
from projections.secret_phrases import _CARD_RUN, _CARD_SEPARATORS, budget, elements
from projections.secrets import (
    _PLAIN_URL,
    _QUERY_VALUE,
    _assignments,
    _encoded_query_values,
    _tokens,
    find,
    luhn,
    random_looking,
    unquote,
)

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


# The card run without its look-ahead (each digit reads the run): what the guarded one is checked against.
_UNGUARDED_CARD_RUN = re.compile(rf"[0-9](?:[{_CARD_SEPARATORS}]{{0,3}}+[0-9]){{12,}}+")


@given(
    st.lists(
        st.sampled_from(["1", "4111", "9", " ", "  ", "    ", "-", "\u2013", "x", "=", "\n", "12345"]), max_size=40
    )
)
@example(["4111", " ", "4111", " ", "4111", " ", "1"])
@example(["1"] * 12 + ["   ", "1"])
@example(["x"] + ["1"] * 13)
def test_the_card_runs_are_those_found_without_the_look_ahead(parts: list[str]) -> None:
    text = "".join(parts)
    found = [match.span() for match in _CARD_RUN.finditer(text)]
    assert found == [match.span() for match in _UNGUARDED_CARD_RUN.finditer(text)]


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
    queries = "?q=my%20password%20is%20x%21&" * 5_000 + "?token=ghp_" + "a1B2" * 9  # all found, the last too
    redacted = REDACTOR.text(queries)
    assert "ghp_" not in redacted and redacted.endswith(REDACTED) and redacted.startswith("?q=")
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


@given(
    st.lists(st.one_of(MARKUP, st.sampled_from(["<P4ss_w0rd>", "<a:b:to.k3n>", "<x:", "<k1>", ":key>"])), max_size=24)
)
@example(["<" + "a" * 60 + ":token>"])  # the name cut at 64 characters: "...:tok" is no secret's
@example(["<a:b:to.k3n>", "x", "</a:b:to.k3n>"])
@example(["<" + "a" * 40 + ":token>", "x"])
def test_the_tag_names_from_runs_holding_a_listed_name_find_what_every_tag_name_finds(parts: list[str]) -> None:
    text = "<a>" * 1400 + "".join(parts)  # long and dense with tags: the runs are looked for
    assert sorted(elements(text, REDACTOR._judge)) == sorted(elements(text, REDACTOR.secret_key))


_KEY_CHARS = string.ascii_letters + string.digits
_PROVIDER_KEYS = (
    *("sk-" + "aB3" * 8, "ghp_" + "x1Y" * 12, "xoxb-" + "1a" * 6, "AKIA" + "Q7" * 8, "SG." + "ab" * 9 + "." + "cd" * 9),
    *("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0", "sntryu_" + "a=" * 21, "0af3" * 8 + "-us12"),
    *("ghp_" + "a" * 36, "AKIA" + "Q" * 16),  # one class throughout: neither random nor base64 of text
)
# base64 of these is too short to look random (under 24 characters): found only as base64 of text
_SHORT_PAIRS = ("日本:hunter2", "a日:hunter2", "º:hunter2xy", "\t:hunter2xyz")
_SECRET_TEXTS = ("user:hunter2", "password=hunter2", "token: " + _PROVIDER_KEYS[1], "x " + _PROVIDER_KEYS[-1])


def _base64_of(before: str, secret: str, urlsafe: bool) -> str:
    raw = (before + secret).encode("utf-8", "surrogatepass")
    return (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode()


TOKENS = st.one_of(
    st.text(alphabet=_KEY_CHARS, min_size=16, max_size=48),  # random keys, and words
    st.text(alphabet=_KEY_CHARS + "+/_.~-", min_size=16, max_size=48),
    # base64 of any text, and of a secret after any character (a control one, a lead byte, a tab)
    st.builds(_base64_of, st.text(max_size=40), st.just(""), st.booleans()),
    st.builds(
        _base64_of,
        st.one_of(st.text(max_size=3), st.sampled_from(["", "\t", "\n", "\r", "\ufeff", "é", "日本"])),
        st.sampled_from(_SECRET_TEXTS),
        st.booleans(),
    ),
    st.sampled_from(_PROVIDER_KEYS),
    st.builds("/".join, st.lists(st.sampled_from(["api", "bot", "keys", "x" * 20, *_PROVIDER_KEYS]), max_size=4)),
    st.builds(lambda n: f"item_{n}_name_value_x", st.integers(0, 10**9)),
    st.builds(lambda n: f"{n:032x}", st.integers(0, 2**128)),
)


@given(st.lists(st.tuples(TOKENS, st.sampled_from(["", "=", "==", " ", "\n", '"', "=x", ",", "/", "-"])), max_size=8))
@example([("keys/" + _PROVIDER_KEYS[-2], " "), ("x" * 20 + "/" + _PROVIDER_KEYS[-1], "")])  # a key in a path
@example([(_base64_of(before, _SECRET_TEXTS[1], False), " ") for before in ("\t", "\r", "a日本", "日本", "\ufeff")])
@example([(_base64_of(pair, "", False), " ") for pair in _SHORT_PAIRS])
def test_the_candidate_tokens_find_what_judging_every_token_finds(parts: list[tuple[str, str]]) -> None:
    text = "".join(token + after for token, after in parts)
    found = sorted(_tokens(text, 0, REDACTOR.secret_key))
    assert found == sorted(_tokens(text, 0, REDACTOR.secret_key, every_token=True))


def _runs_of_classes(rng: random.Random) -> str:
    """A token of 2 to 6 runs of one class (lower, upper, digits), with punctuation between its characters."""
    classes = (string.ascii_lowercase, string.ascii_uppercase, string.digits)
    out: list[str] = []
    kind = rng.randrange(3)
    for _ in range(rng.randint(2, 6)):
        kind = (kind + rng.randint(1, 2)) % 3
        for _ in range(rng.randint(1, 2 if kind < 2 else 6)):
            out.append(rng.choice(classes[kind]) + "".join(rng.choice("+/_.~-") for _ in range(rng.randint(0, 3))))
    return "".join(out)


def test_every_random_looking_token_is_a_candidate() -> None:
    """Near the candidates' bounds: few runs of a class, many punctuation characters, 24 characters or more."""
    rng = random.Random(36)
    taken = [token for token in (_runs_of_classes(rng) for _ in range(25_000)) if random_looking(token)]
    few_runs = [token for token in taken if len(re.findall(r"[a-z]+|[A-Z]+|[0-9]+", re.sub(r"\W|_", "", token))) < 5]
    assert len(few_runs) > 5  # the bound on punctuation is tried
    assert [token for token in taken if not list(_tokens(token, 0, REDACTOR.secret_key))] == []


NAMES = st.one_of(
    st.sampled_from(["password", "PASS_WORD", "p4ssw0rd", "api-key", "pw", "x_token", "k12x", "item_7", "-pin"]),
    st.sampled_from(["p\u0430ssword", "\uff50\uff41\uff53\uff53", "pass\nword", "to\u200bken", "Ke@y", "$ecret"]),
    st.text(alphabet=string.ascii_letters + string.digits + "_-.@$ \n", max_size=12),
    st.text(max_size=8),
)


@given(st.sets(NAMES, max_size=60))
def test_the_names_told_apart_at_once_are_those_told_one_by_one(names: set[str]) -> None:
    assert REDACTOR.secret_among(names) == {name for name in names if REDACTOR.secret_key(name)}


ASSIGNMENT_PARTS = st.sampled_from(
    [
        *("password", "pw", "PGPASSWORD", "api_key", "Authorization", "token2", "k1", "x", "p\u00adw", "$pw"),
        *("=", ":", "=>", ":=", "==", "://", " ", "  ", "\t", '"', "'", '\\"', "-", "--", "\n", "?", "&"),
        *("hunter2", "export ", "a" * 70 + "pw", "1pw", "pw-", "$x", "\u00adpw"),
    ]
)


@given(st.lists(ASSIGNMENT_PARTS, max_size=30))
@example(["api_key", "  ", "\t", "  ", ":", "hunter2"])
@example(["x", '\\"', "password", '\\"', ":", " ", '"', "hunter2"])
def test_the_signs_after_secret_names_find_what_reading_every_sign_finds(parts: list[str]) -> None:
    text = "".join(parts)
    found = sorted(_assignments(text, text[::-1], REDACTOR.secret_key))
    assert found == sorted(_assignments(text, text[::-1], REDACTOR.secret_key, every_sign=True))


NAMED_PARTS = st.sampled_from(
    [
        *(
            "password",
            "P4ss_w0rd",
            "to.k3n",
            "conn_str",
            "CONN-STR",
            "s.e.s.s.i.o.n",
            "k1",
            "x",
            "-pw",
            "a" * 70 + "key",
        ),
        *("=", ":", "=>", ":=", " ", "\t", '"', "'", '\\"', "-", "\n", "?", "&", "hunter2", "${x}", "@"),
    ]
)


@given(st.lists(NAMED_PARTS, max_size=30))
@example(["P4ss_w0rd", "=", "hunter2"])
@example(["conn_str", '\\"', " ", ":", "x"])
@example(["a" * 70 + "key", "=", "x"])
@example(["key_" + "a" * 58, "=", "x"])  # a long name: its first word is read
def test_the_names_from_runs_holding_a_listed_name_find_what_collecting_every_name_finds(parts: list[str]) -> None:
    text = "k=1 " * 1024 + "".join(parts)  # long and dense with signs: the runs are looked for
    found = sorted(_assignments(text, text[::-1], REDACTOR._judge))
    assert found == sorted(_assignments(text, text[::-1], REDACTOR.secret_key))  # (a plain judge: every name)


@given(
    st.lists(
        st.sampled_from(["%41%42", "x%20y", "my%20password%20is%20hunter2%21", "k%3Dghp_" + "a1B2" * 9]), max_size=300
    )
)
def test_each_distinct_query_value_is_searched_once_and_every_place_of_it_found(values: list[str]) -> None:
    text = "".join(f"?q={value}&" for value in values)
    secret = {"my%20password%20is%20hunter2%21", "k%3Dghp_" + "a1B2" * 9}
    expected = [match.span(1) for match in _QUERY_VALUE.finditer(text) if match.group(1) in secret]
    assert sorted(_encoded_query_values(text, 0, REDACTOR._judge)) == expected


URL_PARTS = st.one_of(
    st.text(alphabet=string.ascii_letters + string.digits + "._~/-", max_size=6),
    st.sampled_from(
        ["pw/", "/password", "-is-", "/pin-code", "--", "-u", "login", "AA", "Bearer", "Token", "-----BEGIN"]
    ),
    st.sampled_from([" ", "=", "@", "%41", ":", "?a=", " is x9", "/4111111111111111", "/4111-1111-1111-1111"]),
    st.sampled_from(["ATATT3" + "xY_z-0" * 10, *_PROVIDER_KEYS]),
    st.sampled_from(["hooks.slack.com/services/T0A1/B0C2/", "discord.com/api/webhooks/1234/", "x" * 20, "/"]),
    st.builds(lambda n: f"{n:08x}.png", st.integers(0, 2**32)),
)


@given(st.sampled_from(["https://", "http://"]), st.lists(URL_PARTS, max_size=14))
@example("https://", ["pw/"] * 61)  # as many names as a plain URL holds
@example("https://", ["pw/"] * 70)  # more than that: the rest of the text is redacted at once
@example("https://", ["x/", "/4111111111111111", "/password", " is x9"])
@example("https://", ["x/password", "=", "hunter2x"])
@example("https://", ["x/password", ":", "hunter2x"])
@example("https://", ["hunter2x", "@", "example.com/"])
@example("https://", ["a.com/x", "%41", "/", "sk-", "a1B2c3D4" * 4])
@example("https://", ["cdn.example.com/assets/redstone/", "0a1b2c3d.png"])
def test_a_plain_url_read_by_fewer_detectors_finds_what_every_detector_finds(scheme: str, parts: list[str]) -> None:
    text = scheme + "".join(parts)
    found = sorted(find(text, REDACTOR.secret_key))
    assert found == sorted(find(text, REDACTOR.secret_key, every_detector=True))


def test_the_shortcut_is_taken_by_plain_urls_only() -> None:
    assert _PLAIN_URL.fullmatch("https://cdn.example.com/assets/redstone/0a1b2c3d.png") is not None
    assert _PLAIN_URL.fullmatch("https://" + "pw/" * 61) is not None
    for other in (
        "https://" + "pw/" * 62,
        "https://a@b/",
        "https://a/?b=c",
        "https://a/%41",
        "https://a/ b",
        "ftp://a/b",
    ):
        assert _PLAIN_URL.fullmatch(other) is None
