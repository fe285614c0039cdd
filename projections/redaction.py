"""Redaction of secrets in traces: by key, at any depth, and by value, wherever it appears. Pure.

Applied twice: before a run is produced (secrets never reach the topic) and again when it is projected
(a producer that skipped it still cannot put one in the projection). Its cost is linear in the size of the run:
the walk is iterative, a key is split into words once and only joined up to the longest secret name, and the
value detectors (projections/secrets.py) are linear.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate, islice
from typing import Any

from projections import secret_phrases, secrets
from projections.secret_phrases import leet

REDACTED = "[REDACTED]"

# Keys are compared case-insensitively and without separators, whole or word by word:
# api-key = api_key = apiKey = APIKEY; "keyboard" and "author" are left alone. Plurals are listed where the
# singular is a secret and the plural is not a count ("max_tokens" and "keys" stay readable).
SECRET_KEYS: tuple[str, ...] = (
    "password",
    "passwords",
    "passwd",
    "pwd",
    "pw",  # short names: a form's `pw`, `psw`, `pswd`, `pword`
    "psw",
    "pswd",
    "pword",
    "pass",
    "passcode",
    "passphrase",
    "passphrases",
    "token",
    "secret",
    "secrets",
    "key",
    "apikey",
    "apikeys",
    "privatekey",
    "privatekeys",
    "privkey",
    "auth",
    "authorization",
    "bearer",
    "jwt",
    "credential",
    "credentials",
    "clientsecret",
    "refresh",
    "refreshtoken",
    "accesstoken",
    "idtoken",
    "signature",
    "sig",
    "cookie",
    "cookies",
    "setcookie",
    "session",
    "sessionid",
    "ssn",
    "pin",
    "cvv",
    "cvv2",
    "cvc",
    "csc",
    "securitycode",
    "cardnumber",
    "creditcard",
    "ccnumber",
    "ccn",
    "cvn",
    "otp",
    "totp",
    "mfacode",
    "recoverycode",
    "recoverycodes",
    "backupcode",
    "backupcodes",
    "mnemonic",
    "seedphrase",
    "dsn",
    "connectionstring",
    "connstring",
    "connstr",
)

# Names ending in one of these are secret whatever stands before: PGPASSWORD, XSRFTOKEN, botToken.
SECRET_SUFFIXES: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "token",
    "secret",
    "apikey",
    "privatekey",
    "credential",
    "credentials",
)

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_NOT_ALNUM = re.compile(r"[^a-z0-9]")
# A key that is a name and nothing else (letters, separators, at most 24): never a secret by itself. Others
# (digits, symbols, other scripts, long ones) are read as text too: a token may be used as a key.
_ORDINARY_KEY = re.compile(r"[A-Za-z_][A-Za-z_.-]*+")
# A short name of letters, digits and separators: too short for a token or a card, and no sign, space or '@'.
_SHORT_NAME = re.compile(r"[A-Za-z0-9_.-]{1,12}+")
# Names of a header or field in name/value pairs: [{"name": "Authorization", "value": ...}] (HAR, fetch).
_PAIR_NAMES = ("name", "key", "header", "field")
_PAIR_VALUES = ("value", "val")
# Enough for every key of a run; bounded so a stream of unique keys cannot grow it.
_KEY_CACHE_SIZE = 4096
# The keys of an object, one to a line: all names (_ORDINARY_KEY), or names and short names (_SHORT_NAME).
_ORDINARY_KEY_LINES = re.compile(r"(?:[A-Za-z_][A-Za-z_.-]*+\n)*+[A-Za-z_][A-Za-z_.-]*+")
_SHORT_KEY_LINES = re.compile(
    r"(?:(?:[A-Za-z0-9_.-]{1,12}+|[A-Za-z_][A-Za-z_.-]*+)\n)*+(?:[A-Za-z0-9_.-]{1,12}+|[A-Za-z_][A-Za-z_.-]*+)"
)
_ORDINARY_KEYS, _SHORT_KEYS, _OTHER_KEYS = 1, 2, 0
# Objects with at most this many keys have their key set's judgement remembered.
_CACHED_KEY_SET = 32
_CONTAINERS = (dict, list)


@dataclass(frozen=True)
class Redactor:
    """The key list and the extra value patterns; settings may only add to the defaults."""

    keys: frozenset[str]
    patterns: tuple[re.Pattern[str], ...]
    _longest: int = field(init=False, repr=False, compare=False)
    _seen: dict[str, bool] = field(init=False, repr=False, compare=False, default_factory=dict)
    _names: dict[str, bool] = field(init=False, repr=False, compare=False, default_factory=dict)
    _key_sets: dict[tuple[Any, ...], int] = field(init=False, repr=False, compare=False, default_factory=dict)
    _holds_key: Callable[[str], re.Match[str] | None] = field(init=False, repr=False, compare=False)
    _least_keys: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _spelled_keys: re.Pattern[bytes] = field(init=False, repr=False, compare=False)
    _judge: Callable[[str], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_longest", max((len(key) for key in self.keys), default=0))
        # every name found secret holds a listed key (or ends with a suffix, each a listed key too): one
        # search in C tells most names apart
        object.__setattr__(self, "_holds_key", re.compile(_trie_pattern((*self.keys, *SECRET_SUFFIXES))).search)
        # the listed names that hold no other: a name holds a listed one when it holds one of these
        least = sorted(key for key in self.keys if not any(other != key and other in key for other in self.keys))
        object.__setattr__(self, "_least_keys", tuple(re.compile(re.escape(key)) for key in least))
        # the same, written in a lower-cased text with the separators a name is compared without between letters
        object.__setattr__(self, "_spelled_keys", re.compile(_trie_pattern(least, _SEPARATORS).encode("ascii")))
        # what the value detectors are given to tell a secret's name: called for one (in C, no frame of its
        # own), or `among` for many at once (secret_phrases.secret_among)
        judge = partial(self.secret_key)
        setattr(judge, "among", self.secret_among)  # noqa: B010 (a partial takes attributes; typed, it does not)
        setattr(judge, "runs", self.key_runs)  # noqa: B010
        object.__setattr__(self, "_judge", judge)

    @classmethod
    def build(cls, extra_keys: Iterable[str] = (), extra_patterns: Iterable[str] = ()) -> Redactor:
        """Extra patterns are the operator's regexes (MEMLOG_REDACT_PATTERNS), applied as written: keep them
        free of nested repetition, or they can cost more than the built-in detectors."""
        keys = frozenset(_normal(key) for key in (*SECRET_KEYS, *extra_keys))
        patterns = tuple(re.compile(pattern, re.DOTALL) for pattern in extra_patterns)
        return cls(keys, patterns)

    def secret_key(self, key: str) -> bool:
        known = self._seen.get(key)
        if known is None:
            known = self._secret_key(key)
            if len(self._seen) >= _KEY_CACHE_SIZE:
                self._seen.clear()
            self._seen[key] = known
        return known

    def secret_among(self, names: Collection[str]) -> set[str]:
        """The secret names among distinct names. Those of ASCII letters, digits and signs are told apart
        in C at once: one that neither as written nor with digits read as letters holds a listed name is
        not a secret's (what _secret_key looks for first); only the others are judged one by one."""
        if len(names) < 16:
            return {name for name in names if self.secret_key(name)}
        plain = list(names)
        joined = "\n".join(plain)
        secret: set[str] = set()
        if not joined.isascii() or joined.count("\n") >= len(plain):  # (a name holding a line break)
            secret = {name for name in plain if not (name.isascii() and "\n" not in name) and self.secret_key(name)}
            plain = [name for name in plain if name.isascii() and "\n" not in name]
            joined = "\n".join(plain)
        raw = joined.encode("ascii")
        held: set[int] = set()  # indexes in `plain`
        for normal in (raw.lower(), raw.translate(_LEET_BYTES).lower()):
            lines = normal.translate(None, _NOT_NAME_BYTES).decode("ascii")  # as _normal, a name to a line
            found = [key for key in self._least_keys if key.pattern in lines]  # (each a search in C)
            if found:
                starts = list(accumulate((len(line) + 1 for line in lines.split("\n")), initial=0))
                for key in found:
                    held.update(bisect_right(starts, match.start()) - 1 for match in key.finditer(lines))
        return secret | {plain[index] for index in held if self.secret_key(plain[index])}

    def key_runs(self, text: str) -> list[tuple[int, int]] | None:
        """Where the runs of name characters (ASCII letters, digits, '_', '.', '-', as long as they go) that
        hold a listed name start and end, in order, found in C: as written or with digits read as letters,
        and without the separators a name is compared without. Any name written in the text that is a
        secret's lies in one of them (what secret_among and _secret_key look for first). None for a text
        that is not ASCII (names folded from other scripts), or past `_MAX_KEY_RUNS` places holding one."""
        if not text.isascii():
            return None
        raw = text.encode("ascii")
        lowered = raw.lower()
        found: list[int] = []
        for spelled in (lowered, lowered.translate(_LEET_BYTES)):
            found.extend(match.start() for match in islice(self._spelled_keys.finditer(spelled), _MAX_KEY_RUNS + 1))
            if len(found) > _MAX_KEY_RUNS:  # (a text dense with them: read no further)
                return None
        edges = raw.translate(_RUN_EDGES)  # a name character kept, any other one a line break
        runs = {(edges.rfind(b"\n", 0, at) + 1, edges.find(b"\n", at) % (len(raw) + 1)) for at in found}
        return sorted(runs)

    def _secret_key(self, key: str) -> bool:
        if key.isascii() and self._holds_key(_normal(key)) is None and self._holds_key(_normal(leet(key))) is None:
            return False  # neither as written nor with digits read as letters does it hold a listed name
        # compared as written, then as it reads: look-alike letters, full-width forms, digits for letters
        return any(self._secret_spelling(spelling) for spelling in (key, *secret_phrases.folded_names(key)))

    def _secret_spelling(self, key: str) -> bool:
        normal = _normal(key)
        if normal in self.keys or normal.endswith(SECRET_SUFFIXES):
            return True
        if self._holds_key(normal) is None:  # the words joined below are parts of `normal`
            return False
        words = [word.lower() for word in _WORDS.findall(key)]
        for first in range(len(words)):
            joined = ""
            for last in range(first, len(words)):  # joined only up to the longest name: linear in the key
                joined += words[last]
                if len(joined) > self._longest:
                    break
                if joined in self.keys:
                    return True
        return False

    def text(self, value: str) -> str:
        """A string: JSON inside it is redacted as JSON; secret-looking values anywhere are replaced."""
        if secrets.plain(value) and not self.patterns:
            return value
        stripped = value.strip()
        # JSON encoded inside the string, at any depth: an object, an array, or a quoted string of JSON
        if (stripped[:1], stripped[-1:]) in (("{", "}"), ("[", "]"), ('"', '"')) and len(stripped) > 1:
            try:
                inner = json.loads(stripped)
                return json.dumps(self.value(inner), ensure_ascii=False, separators=(",", ":"))
            except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
                pass
        spans = secrets.find(value, self._judge)
        for pattern in self.patterns:
            spans.extend(match.span() for match in pattern.finditer(value))
        return _replace(value, spans)

    def value(self, value: Any) -> Any:
        """Any JSON value, at any depth (walked with a stack, so depth costs no recursion)."""
        if isinstance(value, str):
            return self.text(value)
        if not isinstance(value, dict | list):
            return _number(value)
        text, secret_key, seen = self.text, self.secret_key, self._seen
        top: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(value, top, 0)]
        while stack:
            node, parent, slot = stack.pop()
            if isinstance(node, dict):
                copy: dict[Any, Any] = {}
                parent[slot] = copy
                paired = self._paired_value(node)
                if paired is None and self._plain_keys(node):  # only the values are read
                    for key, item in node.items():
                        if type(item) is str:
                            copy[key] = text(item) if item else item
                        elif isinstance(item, _CONTAINERS):
                            copy[key] = None
                            stack.append((item, copy, key))
                        else:
                            copy[key] = (
                                item if type(item) is not int or -_CARD_MIN < item < _CARD_MIN else _number(item)
                            )
                    continue
                for shown, value_of in node.items():
                    item = value_of
                    key = shown if type(shown) is not str or self._ordinary(shown) else self._key(shown, item, copy)
                    if isinstance(item, list) and self._secret_list(key):
                        item = [REDACTED if isinstance(one, str) and _secret_item(one) else one for one in item]
                    if item is None or item == "":
                        copy[key] = item
                    elif key == paired or (seen.get(key) if key in seen else secret_key(str(key))):
                        copy[key] = REDACTED
                    elif isinstance(item, str):
                        copy[key] = text(item)
                    elif isinstance(item, dict | list):
                        copy[key] = None  # keeps the key's place; filled when the stack reaches it
                        stack.append((item, copy, key))
                    else:
                        copy[key] = _number(item)
            else:
                items: list[Any] = list(node)
                parent[slot] = items
                hidden = self._named_in_list(node)
                for index, item in enumerate(node):
                    if isinstance(item, str):
                        items[index] = REDACTED if item and index in hidden else text(item)
                    elif isinstance(item, dict | list):
                        if index in hidden:
                            items[index] = REDACTED
                        else:
                            stack.append((item, items, index))
                    elif index in hidden and item is not None:
                        items[index] = REDACTED
                    else:
                        items[index] = _number(item)
        return top[0]

    def _plain_keys(self, node: dict[Any, Any]) -> bool:
        """No key of the object is a secret's name, holds a secret or is named by its value, told in C for
        all its keys at once (the walk then reads only the values). Remembered for small objects, whose
        keys repeat from object to object."""
        if self.patterns or not node:
            return False
        if len(node) > _CACHED_KEY_SET:
            kind = self._judge_keys(node)
        else:
            keys = tuple(node)
            known = self._key_sets.get(keys)
            if known is None:
                known = self._judge_keys(keys)
                if len(self._key_sets) >= _KEY_CACHE_SIZE:
                    self._key_sets.clear()
                self._key_sets[keys] = known
            kind = known
        if kind == _SHORT_KEYS:  # a short key with digits is redacted when its value is a secret's name
            return self._no_name_in(item for item in node.values() if type(item) is str and len(item) <= 64)
        return kind == _ORDINARY_KEYS

    def _judge_keys(self, keys: Iterable[Any]) -> int:
        try:
            joined = "\n".join(keys)
        except TypeError:  # a key that is not a string
            return _OTHER_KEYS
        if _ORDINARY_KEY_LINES.fullmatch(joined) is not None:
            kind = _ORDINARY_KEYS
        elif _SHORT_KEY_LINES.fullmatch(joined) is not None:
            kind = _SHORT_KEYS
        else:
            return _OTHER_KEYS
        return kind if self._no_name_in((joined,)) else _OTHER_KEYS

    def _no_name_in(self, texts: Iterable[str]) -> bool:
        """True when no line of these ASCII texts is a secret's name: neither the lines joined up, nor
        they with digits read as letters, hold a listed name (what secret_key looks for first)."""
        joined = "\n".join(texts)
        if not joined.isascii():
            return False
        return self._holds_key(_normal(joined)) is None and self._holds_key(_normal(leet(joined))) is None

    def _ordinary(self, key: str) -> bool:
        """A key that is a name and nothing else; remembered, as keys repeat from object to object."""
        known = self._names.get(key)
        if known is None:
            known = _ORDINARY_KEY.fullmatch(key) is not None
            if len(self._names) >= _KEY_CACHE_SIZE:
                self._names.clear()
            self._names[key] = known
        return known

    def _key(self, key: str, item: Any, taken: dict[Any, Any]) -> str:
        """A key that is itself a secret, shown redacted: a token used as a name, or a name whose value says
        what it is ({"hunter2": "password"}). Identifier-like keys never come here (_ORDINARY_KEY)."""
        # a short name with digits ("k12x", "item_7") holds no secret by itself: no detector finds one in it
        shown = key if not self.patterns and _SHORT_NAME.fullmatch(key) is not None else self.text(key)
        if shown == key and isinstance(item, str) and 0 < len(item) <= 64 and " " not in item and self.secret_key(item):
            shown = REDACTED
        if shown != key:
            count = 1
            unique = shown
            while unique in taken:  # two keys redacted alike keep one entry each
                count += 1
                unique = f"{shown}#{count}"
            return unique
        return key

    def _secret_list(self, key: Any) -> bool:
        """A list under a plural secret name ("tokens", "api_keys"): its strings that are not plain words
        are secrets ("tokens": ["the", "cat"] from a tokenizer stay)."""
        if type(key) is not str or not key.endswith(("s", "S")):
            return False
        return self.secret_key(key[:-1])

    def json_text(self, text: str) -> str:
        """A JSON text (tool arguments, results): parsed, redacted, written back; plain text otherwise."""
        try:
            parsed = json.loads(text)
            return json.dumps(self.value(parsed), ensure_ascii=False, separators=(",", ":"))
        except (ValueError, RecursionError):
            return self.text(text)

    def _paired_value(self, node: dict[Any, Any]) -> str | None:
        """The value field of a {"name": "Authorization", "value": ...} pair, when the name is a secret's."""
        if "value" not in node and "val" not in node:  # most objects: no name/value pair
            return None
        for name in _PAIR_NAMES:
            named = node.get(name)
            if isinstance(named, str) and len(named) <= 256 and self.secret_key(named):
                return next((key for key in _PAIR_VALUES if key in node), None)
        return None

    def _named_in_list(self, items: list[Any]) -> set[int]:
        """Positions named secret by the item before them: ["Authorization", "Bearer ..."] header pairs and
        ["--password", "hunter2"] argument lists."""
        hidden: set[int] = set()
        if len(items) == 2 and _secret_name(items[0], self):
            hidden.add(1)
        for index, item in enumerate(items[:-1]):
            if isinstance(item, str) and item.startswith("-") and _secret_name(item.lstrip("-"), self):
                hidden.add(index + 1)
        return hidden


# More places holding a listed name than this in a text: its names are all collected (key_runs).
_MAX_KEY_RUNS = 4096
# What a name is compared without, between the letters of a listed name (spelled in key_runs).
_SEPARATORS = "[_.-]*+"
# A name's characters kept, every other byte a line break: the edges of runs of names.
_RUN_EDGES = bytes.maketrans(
    bytes(range(256)),
    bytes(code if code < 128 and (chr(code).isalnum() or chr(code) in "_.-") else 10 for code in range(256)),
)
# ASCII signs and spaces a name is compared without (as _normal drops them), and digits read as letters
_NOT_NAME_BYTES = bytes(code for code in range(128) if not chr(code).isalnum() and code != 10)
_LEET_BYTES = bytes.maketrans(b"013457@$", b"oieastas")

_CARD_MIN = 10**12  # the least int with 13 digits


def _number(value: Any) -> Any:
    """A card number written as a JSON number is a card number too."""
    if type(value) is int and _CARD_MIN <= abs(value) < 10**19 and secrets.card_number(str(abs(value))):
        return REDACTED
    return value


def _secret_name(item: Any, redactor: Redactor) -> bool:
    return isinstance(item, str) and 0 < len(item) <= 256 and " " not in item and redactor.secret_key(item)


def _replace(text: str, spans: list[tuple[int, int]]) -> str:
    """Each run of overlapping or touching spans becomes one marker."""
    if not spans:
        return text
    spans.sort()
    parts: list[str] = []
    position = 0
    covered = -1  # the end of the spans merged so far; -1 before the first
    for start, end in spans:
        if start > covered:
            parts.append(text[position:start])
            parts.append(REDACTED)
            position = start
        covered = max(covered, end)
        position = covered
    parts.append(text[position:])
    return "".join(parts)


def _trie_pattern(words: Iterable[str], between: str = "") -> str:
    """A pattern matching any of the words, written as their tree of prefixes ("pass(?:word|wd)?"): at
    each position the engine tries a letter's branch, not every word (3 times faster than "|".join).
    `between`: a pattern allowed between two letters of a word."""
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + _joined(between, pattern(node[char])) for char in sorted(node) if char]
        if not branches:
            return ""
        if "" in node:
            return f"(?:{'|'.join(branches)})?"
        return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"

    return pattern(tree)


def _joined(between: str, rest: str) -> str:
    return between + rest if rest and between else rest


def _normal(key: str) -> str:
    return _NOT_ALNUM.sub("", key.lower())


def _secret_item(item: str) -> bool:
    """An item of a list under a plural secret name: anything but a name (letters and separators) or a phrase."""
    return bool(item) and _ORDINARY_KEY.fullmatch(item) is None and " " not in item.strip()
