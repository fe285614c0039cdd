"""Redaction: secret keys at any depth and secret-looking values anywhere never reach the event or the trace."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.redaction import REDACTED, Redactor
from projections.traces import trace_document
from schemas.catalog import Catalog
from schemas.codec import Codec
from schemas.events import Envelope, ModelStep, RunTraced, TraceToolCall, to_record

REDACTOR = Redactor.build()
CODEC = Codec(Catalog())

SECRET_KEYS = [
    "password",
    "token",
    "secret",
    "key",
    "apikey",
    "auth",
    "authorization",
    "bearer",
    "jwt",
    "credential",
    "clientsecret",
    "privatekey",
    "refresh",
    "ssn",
    "cookie",
    "api-key",
    "api_key",
    "apiKey",
    "API_KEY",
    "accessToken",
    "refresh_token",
    "client-secret",
    "privateKey",
    "Set-Cookie",
    "X-Auth-Token",
    "userPassword",
]
# Each secret value carries a unique marker, so the test can tell whether any part of it survived.
SECRET_VALUES = [
    "Bearer abcDEF123ghiJKL456mno{m}",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{m}.c2lnbmF0dXJlLXZhbHVl",
    "sk-{m}aBcDeFgHiJkLmNoPqRsT",
    "sk-proj-{m}aBcDeFgHiJkLmNoPqRsTuV",
    "AKIA{m}XYZ",  # AKIA and 16 upper-case letters or digits
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE{m}pAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----\n{m}MIIEvQIBADANBg\n-----END PRIVATE KEY-----",
]
HARMLESS_KEYS = st.sampled_from(["name", "x", "items", "keyboard", "author", "monkey", "count", "notes"])


def marker(draw: st.DrawFn) -> str:
    return "M" + draw(st.text(alphabet="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=12, max_size=12))


@st.composite
def payloads(draw: st.DrawFn, secrets: list[str]) -> Any:
    """A nested JSON value with secrets under secret keys and secret-looking values in random places."""

    def node(depth: int) -> Any:
        kind = draw(st.sampled_from(["dict", "list", "text", "secret-value", "json-string"] if depth < 4 else ["text"]))
        if kind == "dict":
            value: dict[str, Any] = {}
            for _ in range(draw(st.integers(1, 3))):
                if draw(st.booleans()):
                    secret = marker(draw)
                    secrets.append(secret)
                    value[draw(st.sampled_from(SECRET_KEYS))] = draw(st.sampled_from([secret, f"x{secret}y"]))
                else:
                    value[draw(HARMLESS_KEYS)] = node(depth + 1)
            return value
        if kind == "list":
            return [node(depth + 1) for _ in range(draw(st.integers(1, 3)))]
        if kind == "secret-value":
            secret = marker(draw)
            secrets.append(secret)
            return f"see {draw(st.sampled_from(SECRET_VALUES)).format(m=secret)} here"
        if kind == "json-string":
            return json.dumps(node(depth + 1))
        return draw(st.text(alphabet="abc xyz.,", max_size=12))

    return node(0)


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_no_secret_reaches_the_produced_event_or_the_projected_trace(data: st.DataObject) -> None:
    secrets: list[str] = []
    arguments = data.draw(payloads(secrets))
    result = data.draw(payloads(secrets))
    prompt = json.dumps(data.draw(payloads(secrets)))
    output = data.draw(payloads(secrets))
    output_text = output if isinstance(output, str) else json.dumps(output)
    run = RunTraced(
        Envelope(tenant="t", subject="s", agent="a", thread="session", producer="test", occurred_at=2),
        "run-1",
        "ok",
        1,
        2,
        (ModelStep(0, "m", prompt, output_text, 1, 1, 1, 1),),
        (TraceToolCall(1, "tool", json.dumps(arguments), json.dumps(result), True, 1, 1),),
    )
    from projections.traces import redact_run

    produced = CODEC.encode(RunTraced.TYPE, to_record(redact_run(run, REDACTOR)))
    projected = json.dumps(trace_document(run, REDACTOR, 7))  # the projection redacts again, by itself
    for secret in secrets:
        assert secret.encode() not in produced, secret
        assert secret not in projected, secret


@pytest.mark.parametrize("key", ["api-key", "api_key", "apiKey", "APIKEY", "x-api-key", "clientSecret", "SSN"])
def test_secret_keys_match_ignoring_case_and_separators(key: str) -> None:
    assert REDACTOR.value({key: "value", "keyboard": "qwerty", "author": "ann"}) == {
        key: REDACTED,
        "keyboard": "qwerty",
        "author": "ann",
    }


def test_the_lists_can_only_be_extended() -> None:
    extended = Redactor.build(extra_keys=["pin"], extra_patterns=[r"\bPIN-\d{4}\b"])
    assert extended.value({"pin": "1234", "password": "x", "note": "use PIN-9876"}) == {
        "pin": REDACTED,
        "password": REDACTED,
        "note": f"use {REDACTED}",
    }
    assert REDACTOR.keys <= extended.keys


def test_json_inside_strings_is_redacted_as_json() -> None:
    nested = json.dumps({"outer": json.dumps({"token": "t0p", "ok": 1})})
    assert json.loads(json.loads(REDACTOR.json_text(nested))["outer"]) == {"token": REDACTED, "ok": 1}
