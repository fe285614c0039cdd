"""The classes of secrets a probe found reaching MongoDB and the export, each in at least 10 shapes: none
reaches the produced event (Kafka) or the projected trace (MongoDB, and the export that reads it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from projections.redaction import Redactor
from projections.traces import redact_run, trace_document
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import Envelope, ModelStep, RunTraced, TraceToolCall, to_record
from tests.unit.secret_corpus import ORDINARY

REDACTOR = Redactor.build()
CODEC = Codec(Catalog())

# Each entry: (the secret, where it is carried). The carrier is text (a prompt or an output) or JSON
# (a tool call's arguments and result).
CARDS = [
    (card, text)
    for card, text in [
        ("4111111111111111", "charge card 4111111111111111 now"),
        ("4111 1111 1111 1111", "card: 4111 1111 1111 1111."),
        ("5555-5555-5555-4444", "use 5555-5555-5555-4444 please"),
        ("4111.1111.1111.1111", "card 4111.1111.1111.1111"),
        ("4111/1111/1111/1111", "pay with 4111/1111/1111/1111"),
        ("4111_1111_1111_1111", "cc=4111_1111_1111_1111"),
        ("4111\u00a01111\u00a01111\u00a01111", "no-break 4111\u00a01111\u00a01111\u00a01111 spaces"),
        ("4111\u20131111\u20131111\u20131111", "typeset 4111\u20131111\u20131111\u20131111"),
        ("4111 - 1111 - 1111 - 1111", "spaced 4111 - 1111 - 1111 - 1111 dashes"),
        ("4111  1111  1111  1111", "two spaces 4111  1111  1111  1111"),
        ("3782 822463 10005", "amex 3782 822463 10005"),
        ("6011-1111-1111-1117", "discover 6011-1111-1111-1117"),
        ("4111111111111111", "card_4111111111111111"),
        ("4111111111111111", "card-4111111111111111"),
        ("5105 1051 0510 5100", "after a phone 555 1234 5105 1051 0510 5100"),
        ("4111 1111 1111 1111", "mixed 4111 1111-1111.1111".replace("1111-1111.1111", "1111 1111 1111")),
    ]
]
PROSE = [
    ("hunter2", "my password is hunter2"),
    ("Tr0ub4dor&3", "The password for the admin account is Tr0ub4dor&3."),
    ("sunshine", "my password is sunshine"),
    ("correct horse", "the wifi password is 'correct horse' if you need it"),
    ("s3cr3t!", "Her passcode was s3cr3t! yesterday"),
    ("4921", "my pin is 4921"),
    ("hunter22", "my pw's hunter22."),
    ("882211", "the door code is 882211"),
    ("letmein99", "password: letmein99"),
    ("Qwerty123", "the root password is now Qwerty123"),
    ("xyzzy42", "I set my password to xyzzy42 today"),
    ("739201", "your verification code is 739201"),
]
CONFUSABLE_KEYS = [
    ("p\u0430ssword", "hunter2a"),  # Cyrillic
    ("passw\u043erd", "hunter2b"),  # Cyrillic
    ("\u03a1ASSWORD", "hunter2c"),  # Greek
    ("\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44", "hunter2d"),  # full-width
    ("\U0001d429\U0001d41a\U0001d42c\U0001d42c\U0001d430\U0001d428\U0001d42b\U0001d41d", "hunter2e"),  # bold
    ("pass\u200bword", "hunter2f"),  # a zero-width space inside
    ("p4ssw0rd", "hunter2g"),  # digits for letters
    ("\u0430pi_k\u0435y", "hunter2h"),  # Cyrillic  and
    ("t\u043ek\u0435n", "hunter2i"),
    ("\u0455ecret", "hunter2j"),  # Cyrillic
    ("pa\u00adssword", "hunter2k"),  # a soft hyphen inside
    ("\u0422\u041e\u041aEN", "hunter2l"),  # Cyrillic capitals,,
]
SHORT_KEYS = [
    ("pw", "hunter3a"),
    ("PW", "hunter3b"),
    ("user_pw", "hunter3c"),
    ("dbPw", "hunter3d"),
    ("psw", "hunter3e"),
    ("pswd", "hunter3f"),
    ("pword", "hunter3g"),
    ("pwd", "hunter3h"),
    ("pin", "hunter3i"),
    ("ccn", "hunter3j"),
    ("cvn", "hunter3k"),
    ("otp", "hunter3l"),
]
KEY_NAMED: list[tuple[str, Any]] = [
    ("sk-proj-AbCdEfGhIjKlMnOpQrStUv12", {"sk-proj-AbCdEfGhIjKlMnOpQrStUv12": "openai"}),
    ("ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", {"ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789": True}),
    ("hunter4a", {"hunter4a": "password"}),
    ("hunter4b", {"users": {"hunter4b": "pw"}}),
    ("Zx9!kQ2", {"Zx9!kQ2": "passcode"}),
    ("hunter4c", {"tokens": ["hunter4c", "other5x"]}),
    ("hunter4d", {"api_keys": ["hunter4d"]}),
    ("hunter4e", {"passwords": ["hunter4e"]}),
    ("hunter4f", {"secrets": ["hunter4f", "x"]}),
    ("hunter4g", {"auth": {"tokens": ["hunter4g"]}}),
    ("4111111111111111", {"4111111111111111": "card on file"}),
    ("hunter4h", [{"hunter4h": "token"}]),
]
ELEMENTS = [
    ("hunter5a", "<password>hunter5a</password>"),
    ("hunter5b", '<input type="password" value="hunter5b">'),
    ("hunter5c", '<input name="pw" value="hunter5c"/>'),
    ("hunter5d", '<entry key="password">hunter5d</entry>'),
    ("hunter5e", "<apiKey>hunter5e</apiKey>"),
    ("hunter5f", "<ns:Token>hunter5f</ns:Token>"),
    ("hunter5g", "<secret><![CDATA[hunter5g]]></secret>"),
    ("hunter5h", '<param name="clientSecret" value="hunter5h" />'),
    ("hunter5i", '<add key="ConnectionString" value="hunter5i"/>'),
    ("hunter5j", "<credentials>\n  hunter5j\n</credentials>"),
    ("hunter5k", '<meta property="access_token" content="hunter5k">'),
    ("hunter5l", "<PASSWORD attr='1'>hunter5l</PASSWORD>"),
]


def run_of(prompt: str, arguments: Any) -> RunTraced:
    return RunTraced(
        Envelope(tenant="t", subject="s", agent="a", thread="session", producer="test", occurred_at=2),
        "run-1",
        "ok",
        1,
        2,
        (ModelStep(0, "m", prompt, prompt, 1, 1, 1, 1),),
        (TraceToolCall(1, "tool", json.dumps(arguments), json.dumps(arguments), True, 1, 1),),
    )


def reached(secret: str, prompt: str, arguments: Any) -> list[str]:
    """Where the secret is found after redaction: the event on Kafka, the trace in MongoDB."""
    run = run_of(prompt, arguments)
    produced = CODEC.encode(RunTraced.TYPE, to_record(redact_run(run, REDACTOR)))
    projected = json.dumps(trace_document(run, REDACTOR, 7), ensure_ascii=False)
    escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
    return [
        where for where, found in (("kafka", secret.encode() in produced), ("mongodb", escaped in projected)) if found
    ]


@pytest.mark.parametrize(("secret", "text"), CARDS)
def test_a_card_number_in_any_separator_style_is_redacted(secret: str, text: str) -> None:
    assert reached(secret, text, {"note": text}) == []


@pytest.mark.parametrize(("secret", "text"), PROSE)
def test_a_password_written_in_prose_is_redacted(secret: str, text: str) -> None:
    assert reached(secret, text, {"message": text}) == []


@pytest.mark.parametrize(("key", "secret"), CONFUSABLE_KEYS)
def test_a_secret_key_spelled_with_look_alike_letters_is_still_a_secret_key(key: str, secret: str) -> None:
    assert reached(secret, json.dumps({key: secret}, ensure_ascii=False), {key: secret}) == []
    assert reached(secret, f"{key}={secret}", {"env": f"{key}={secret}"}) == []


@pytest.mark.parametrize(("key", "secret"), SHORT_KEYS)
def test_a_short_secret_key_name_is_a_secret_key(key: str, secret: str) -> None:
    assert reached(secret, f"{key}={secret}", {key: secret}) == []


@pytest.mark.parametrize(("secret", "value"), KEY_NAMED)
def test_a_secret_carried_as_a_key_or_in_a_list_of_keys_is_redacted(secret: str, value: Any) -> None:
    assert reached(secret, json.dumps(value), value) == []


@pytest.mark.parametrize(("secret", "markup"), ELEMENTS)
def test_a_secret_in_an_xml_or_html_element_is_redacted(secret: str, markup: str) -> None:
    assert reached(secret, f"the page: {markup} end", {"html": markup}) == []


def test_every_class_has_at_least_10_shapes() -> None:
    sizes = {
        "cards": len(CARDS),
        "prose": len(PROSE),
        "confusables": len(CONFUSABLE_KEYS),
        "short keys": len(SHORT_KEYS),
        "keys and lists of keys": len(KEY_NAMED),
        "elements": len(ELEMENTS),
    }
    assert min(sizes.values()) >= 10, sizes


# Ordinary text near each class: numbers, prose about passwords, markup, names in other scripts.
NEAR_MISSES = [
    "Our PIN pad is broken; the pin is in the drawer.",
    "The password is required and must be at least twelve characters long.",
    "Reset your password from the account page; the password is case sensitive.",
    "Passwords are hashed with bcrypt before they are stored.",
    "The door code is on the whiteboard.",
    "Version 4.1.1.1 shipped on 2024-11-05 with 1,234,567 downloads.",
    "Scores: 4 5 3 2 5 4 4 3 5 2 4 5 3 2 4",
    "Call 555 0134 or 555 0199 before 17:30.",
    "id 3f2b1c9e-8a4d-4e6f-9b2a-7c1d5e8f0a3b",
    "<input type='text' name='username' value='ann'>",
    "<title>How to choose a password</title>",
    '{"type": "password", "name": "pw"}',
    "\u043f\u0430\u0440\u043e\u043b\u044c \u0438 \u043b\u043e\u0433\u0438\u043d"  # Russian words, no secret
    " \u2014 \u0441\u043b\u043e\u0432\u0430 \u043f\u043e-\u0440\u0443\u0441\u0441\u043a\u0438",
    "The compass points north; bypass the gate.",
    '{"tokens": ["the", "cat", "sat"], "max_tokens": 256}',
    '{"keys": ["id", "name", "created_at"]}',
]


@pytest.mark.parametrize("text", [*ORDINARY, *NEAR_MISSES])
def test_ordinary_text_near_the_classes_is_left_alone(text: str) -> None:
    if text.startswith("{"):
        assert REDACTOR.value(json.loads(text)) == json.loads(text)  # JSON in a string is written back compact
    else:
        assert REDACTOR.text(text) == text
