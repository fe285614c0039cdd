"""Redaction of secrets in traces: by key, at any depth, and by value, wherever it appears. Pure.

Applied twice: before a run is produced (secrets never reach the topic) and again when it is
projected (a producer that skipped it still cannot put one in the projection).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

REDACTED = "[REDACTED]"

# Keys are compared case-insensitively and without separators, whole or word by word:
# api-key = api_key = apiKey = APIKEY; "keyboard" and "author" are left alone.
SECRET_KEYS: tuple[str, ...] = (
    "password",
    "passwd",
    "pwd",
    "token",
    "secret",
    "key",
    "apikey",
    "auth",
    "authorization",
    "bearer",
    "jwt",
    "credential",
    "credentials",
    "clientsecret",
    "privatekey",
    "refresh",
    "refreshtoken",
    "ssn",
    "cookie",
    "setcookie",
    "session",
    "sessionid",
    "accesstoken",
    "idtoken",
    "signature",
    "passphrase",
)

SECRET_PATTERNS: tuple[str, ...] = (
    r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?-----END[A-Z ]*PRIVATE KEY-----",  # PEM private keys
    r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]+=*",  # bearer tokens
    r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}",  # JWTs
    r"\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{16,}",  # sk-... API keys
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
)

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


@dataclass(frozen=True)
class Redactor:
    """The key list and the value patterns; settings may only add to the defaults."""

    keys: frozenset[str]
    patterns: tuple[re.Pattern[str], ...]

    @classmethod
    def build(cls, extra_keys: Iterable[str] = (), extra_patterns: Iterable[str] = ()) -> Redactor:
        keys = frozenset(_normal(key) for key in (*SECRET_KEYS, *extra_keys))
        patterns = tuple(re.compile(pattern, re.DOTALL) for pattern in (*SECRET_PATTERNS, *extra_patterns))
        return cls(keys, patterns)

    def secret_key(self, key: str) -> bool:
        if _normal(key) in self.keys:
            return True
        words = [word.lower() for word in _WORDS.findall(key)]
        return any(word in self.keys for word in words) or any(
            "".join(words[i:j]) in self.keys for i in range(len(words)) for j in range(i + 2, len(words) + 1)
        )

    def text(self, value: str) -> str:
        """A string: JSON inside it is redacted as JSON; secret-looking values anywhere are replaced."""
        stripped = value.strip()
        # JSON encoded inside the string, at any depth: an object, an array, or a quoted string of JSON
        if (stripped[:1], stripped[-1:]) in (("{", "}"), ("[", "]"), ('"', '"')) and len(stripped) > 1:
            try:
                inner = json.loads(stripped)
            except ValueError:
                pass
            else:
                return json.dumps(self.value(inner), ensure_ascii=False, separators=(",", ":"))
        for pattern in self.patterns:
            value = pattern.sub(REDACTED, value)
        return value

    def value(self, value: Any) -> Any:
        """Any JSON value, at any depth."""
        if isinstance(value, dict):
            return {
                key: (REDACTED if self.secret_key(str(key)) and item not in (None, "") else self.value(item))
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def json_text(self, text: str) -> str:
        """A JSON text (tool arguments, results): parsed, redacted, written back; plain text otherwise."""
        try:
            parsed = json.loads(text)
        except ValueError:
            return self.text(text)
        return json.dumps(self.value(parsed), ensure_ascii=False, separators=(",", ":"))


def _normal(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())
