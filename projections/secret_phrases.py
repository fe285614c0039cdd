"""Secrets found by what surrounds them in prose and markup, and names folded before they are compared. Pure.

Each detector, like those of projections/secrets.py, costs time linear in the text: a search starts at a
literal, reads a bounded window after it, and the next search starts after what it read.

- Payment card numbers in any separator style (spaces, dashes, dots, slashes, underscores, no-break and thin
  spaces, dashes of typography), checked by the network's prefix and the Luhn digit.
- Passwords written in prose: "my password is hunter2", "the wifi password for the barn was 'x'".
- XML and HTML elements that hold a secret: `<password>x</password>`, `<input type="password" value="x">`,
  `<entry key="apiKey">x</entry>`, CDATA included.
- Names spelled to slip past a list: full-width or mathematical letters (NFKC), look-alike letters of other
  scripts (a confusables map, after Unicode's confusables.txt for the Latin letters a name is written with),
  characters that show nothing (zero-width, soft hyphen), and digits standing for letters ("p4ssw0rd").
"""

from __future__ import annotations

import heapq
import re
import unicodedata
from collections.abc import Callable, Collection, Iterator

Span = tuple[int, int]
IsSecretName = Callable[[str], bool]

# --- names ---------------------------------------------------------------------------------------------

# Look-alikes of Latin letters from Cyrillic, Greek and Armenian (Unicode confusables.txt, the letters of
# secret names), after NFKC has already mapped full-width and mathematical forms to plain ones.
_CONFUSABLES = str.maketrans(
    {
        **dict.fromkeys("\u0430\u03ac\u03b1\u0251", "a"),
        **dict.fromkeys("\u0441\u03f2\u217d", "c"),
        **dict.fromkeys("\u0501\u217e", "d"),
        **dict.fromkeys("\u0435\u03ad\u03b5\u04bd", "e"),
        **dict.fromkeys("\u04bb\u0570", "h"),
        **dict.fromkeys("\u0456\u00ed\u03b9\u03af\u03ca\u0269\u04cf", "i"),
        **dict.fromkeys("\u0458\u03f3", "j"),
        **dict.fromkeys("\u043a\u03ba", "k"),
        **dict.fromkeys("\u217c", "l"),
        **dict.fromkeys("\u0578\u03b7", "n"),
        **dict.fromkeys("\u043e\u03bf\u03cc\u03c3\u0585", "o"),
        **dict.fromkeys("\u0440\u03c1", "p"),
        **dict.fromkeys("\u051b", "q"),
        **dict.fromkeys("\u0455", "s"),
        **dict.fromkeys("\u03c4", "t"),
        **dict.fromkeys("\u03c5\u057d\u03bd", "u"),
        **dict.fromkeys("\u0475", "v"),
        **dict.fromkeys("\u051d\u0461\u03c9", "w"),
        **dict.fromkeys("\u0445\u03c7", "x"),
        **dict.fromkeys("\u0443\u03b3", "y"),
        **dict.fromkeys("\u1d22", "z"),
        **dict.fromkeys("\u0410\u0391", "A"),
        **dict.fromkeys("\u0412\u0392", "B"),
        **dict.fromkeys("\u0421\u03f9", "C"),
        **dict.fromkeys("\u0415\u0395", "E"),
        **dict.fromkeys("\u041d\u0397", "H"),
        **dict.fromkeys("\u0406\u0399", "I"),
        **dict.fromkeys("\u0408", "J"),
        **dict.fromkeys("\u041a\u039a", "K"),
        **dict.fromkeys("\u041c\u039c", "M"),
        **dict.fromkeys("\u039d\u0548", "N"),
        **dict.fromkeys("\u041e\u039f\u0555", "O"),
        **dict.fromkeys("\u0420\u03a1", "P"),
        **dict.fromkeys("\u0405", "S"),
        **dict.fromkeys("\u0422\u03a4", "T"),
        **dict.fromkeys("\u0425\u03a7", "X"),
        **dict.fromkeys("\u04ae\u03a5", "Y"),
        **dict.fromkeys("\u0396Z", "Z"),
        # shown as nothing: a name split by them reads as the name
        **dict.fromkeys("\u00ad\u034f\u180e\u200b\u200c\u200d\u2060\ufeff", None),
    }
)
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"})
_DIGIT_AND_LETTER = re.compile(r"(?=.*[0-9@$])(?=.*[A-Za-z])")


def secret_among(names: Collection[str], is_secret_name: IsSecretName) -> set[str]:
    """The secret names among distinct `names`: told apart in bulk when the judge offers it (`among`, as a
    Redactor's does: most names in C at once), else one by one."""
    among: Callable[[Collection[str]], set[str]] | None = getattr(is_secret_name, "among", None)
    if among is not None:
        return among(names)
    return {name for name in names if is_secret_name(name)}


def leet(name: str) -> str:
    """The name with digits (and '@', '$') read as the letters they stand for: "p4ssw0rd" is "password"."""
    return name.translate(_LEET)


def folded_names(name: str) -> tuple[str, ...]:
    """The spellings a name is compared under besides itself: NFKC with look-alikes folded, and that with
    digits read as letters (only when it mixes them, so "token2" and "v1" are still compared as written)."""
    if name.isascii() and _DIGIT_AND_LETTER.match(name) is None:
        return ()
    folded = unicodedata.normalize("NFKC", name).translate(_CONFUSABLES)
    out = [folded] if folded != name else []
    if _DIGIT_AND_LETTER.match(folded) is not None:
        out.append(folded.translate(_LEET))
    return tuple(out)


# --- payment cards ---------------------------------------------------------------------------------------

# One to three separator characters between digits: space, no-break and thin spaces, -, ., /, _, and the
# typographic dashes. Bounded, so a long run of digits costs a bounded number of steps per start.
_CARD_SEPARATORS = re.escape(" \u00a0\u2009\u202f\u2007-./_\u2010\u2011\u2012\u2013\u2014")
# A maximal run of digits and separators, found once (possessive), then cut into groups in Python. A run
# starts only where the next 12 characters are digits or separators (one step in C: a run of 13 digits has
# 12 such after its first), so most digits, in names and numbers, fail before the run is read.
_CARD_RUN = re.compile(rf"[0-9](?=[0-9{_CARD_SEPARATORS}]{{12}})(?:[{_CARD_SEPARATORS}]{{0,3}}+[0-9]){{12,}}+")
_CARD_GROUP = re.compile(rf"[{_CARD_SEPARATORS}]+")
_THREE_DIGITS = re.compile(r"[0-9]{3}")
# A card's window: a group and up to 6 more (19 digits are at most 7 groups: 1 + 3 * 6 is past 19).
_CARD_WINDOW = re.compile(rf"[0-9]{{1,6}}+(?:[{_CARD_SEPARATORS}]{{1,3}}+[0-9]{{1,7}}+){{1,6}}+")
_DIGITS = re.compile(r"[0-9]+")
# A group a card can start at: 1 to 6 digits, the first a network's (2 to 6), then an inner group of 3 to 6.
_CARD_START = re.compile(rf"(?<![0-9])[2-6][0-9]{{0,5}}+(?=[{_CARD_SEPARATORS}]{{1,3}}+[0-9]{{3,6}}+(?![0-9]))")


def budget(text: str, every: int = 512) -> int:
    """How many candidates (card windows, names in prose, secret elements) a detector judges one by one in
    a text: 64, and 1 for each `every` characters more. Past it, the text is dense with what the detector
    looks for (ordinary text is not), and the rest of it is redacted at once rather than read in Python:
    so the worst case costs a few passes in C, as ordinary text does (bench/redaction.py)."""
    return 64 + len(text) // every


def cards(text: str, is_card_number: Callable[[str], bool]) -> Iterator[Span]:
    """Card numbers whatever separates their digits: a network's prefix and the Luhn digit decide. With
    separators the groups are those of a card (the first 1 to 6 digits, the inner 3 to 6, the last 1 to 6),
    so a list of small numbers, a date or a decimal is not taken for one; a run of more than 19 digits is
    read as consecutive groups, each start tried until 19 digits (so still linear). Past `budget` windows
    judged, the rest of the run is redacted."""
    first = _CARD_RUN.search(text)
    if first is None:  # most texts: no run of 13 digits, told before anything is set up
        return
    left = [budget(text)]
    judged: dict[str, bool] = {}  # a window seen before in this text is not checked again

    def check(digits: str) -> bool:
        left[0] -= 1
        known = judged.get(digits)
        if known is None:
            known = judged[digits] = is_card_number(digits)
        return known

    for run in _CARD_RUN.finditer(text, first.start()):
        start, end = run.span()
        if start > 1 and text[start - 1] in ".," and text[start - 2].isdigit():
            continue  # the decimals of a number
        number = run.group()
        if len(number) < 13:
            continue
        if (start > 0 and text[start - 1].isalnum()) or (end < len(text) and text[end].isalnum()):
            continue  # inside a word: a UUID's or a digest's digits
        if _THREE_DIGITS.search(number) is None:
            continue  # a list of small numbers ("4 4 4 ..."): no card's inner group, and no 13 digits in one
        if left[0] < 0:  # past the budget: every further run at once
            yield start, end
            continue
        if _CARD_GROUP.search(number) is None:  # one group of 13 digits or more
            if check(number):
                yield start, end
            continue
        yield from _card_windows(number, start, check, left)


def _card_windows(number: str, offset: int, check: Callable[[str], bool], left: list[int]) -> Iterator[Span]:
    """The cards in a run of digit groups, tried from each group a card may start at (found in C)."""
    position = 0
    while (candidate := _CARD_START.search(number, position)) is not None:
        if left[0] < 0:  # past the budget: the rest of the run at once
            yield offset + candidate.start(), offset + len(number)
            return
        window = _CARD_WINDOW.match(number, candidate.start())
        assert window is not None  # a candidate is a group followed by another
        ends = [match.end() for match in _DIGITS.finditer(window.group())]
        groups = _DIGITS.findall(window.group())
        position = candidate.start() + ends[0]
        digits = len(groups[0])
        for last in range(1, len(groups)):
            if last > 1 and not 3 <= len(groups[last - 1]) <= 6:
                break  # an inner group a card does not have
            digits += len(groups[last])
            if digits > 19:
                break
            if digits >= 13 and len(groups[last]) <= 6 and check("".join(groups[: last + 1])):
                yield offset + candidate.start(), offset + candidate.start() + ends[last]
                position = candidate.start() + ends[last]
                break


# --- passwords in prose ----------------------------------------------------------------------------------

# What names a secret in a sentence, searched in the lower-cased text (a case-blind pattern with a look-behind
# is tried at every position; this one skips ahead by its first letters). Codes and PINs are taken only when
# their value holds a digit.
_PROSE_NAME = re.compile(
    r"(?:(p(?:ass(?:word|phrase|code|wd)|wd|w)|api[ -]?key|secret[ -]key|access[ -]token)"
    r"|(pin(?:[ -]code| number)?|(?:security|access|door|gate|alarm|verification|login|one-time|2fa|mfa|otp"
    r"|sms|confirmation)[ -]code|otp))s?"
)
# Words that join the name to its value: "is", "was", "'s", "=", ...; "to" and "as" after a verb of setting.
_JOINERS = frozenset(
    {"is", "was", "are", "were", "be", "'s", "\u2019s", "=", ":", "to", "as", "equals", "reads", "becomes"}
)
# Words allowed between the joiner and the value: "is now x", "is still x".
_FILLERS = frozenset({"now", "still", "just", "actually", "simply", "currently", "literally", "set", "changed"})
# A value that is one of these, or reads like a verb's participle or an adverb, is prose about the secret.
_NOT_A_VALUE_WORDS = (
    "the a an my your our his her its their this that these those it not no also always never only required "
    "wrong incorrect invalid correct expired weak strong long short missing empty blank case same different "
    "unknown new old simple easy hard safe secret hidden private stored saved sent shown masked here there "
    "below above what which who used needed in on at for of by with from into and or but if too very so more "
    "less least most at-least enough changed reset rotated set updated being been going ok okay fine good bad "
    "great secure insecure one two three four five six seven eight nine ten twelve characters letters digits "
    "protected encrypted hashed"
)
_NOT_A_VALUE = frozenset(_NOT_A_VALUE_WORDS.split())
# Before a name, these make it a particular one: "my password", "the wifi password", "her pin".
_OWNER = re.compile(
    r"(?<![a-z])(?:my|our|your|his|her|their|the|this|its|new|wifi|wi-fi|admin|root|account|email)"
    r"[ \t]{1,4}+(?:[a-z-]{1,16}+[ \t]{1,4}+)?$"
)
_WINDOW = 96  # characters read after a name: a few words to the joiner and the value
_MAX_WORDS = 7
_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb"


def _lowered(text: str) -> str:
    lowered = text.lower()
    # a few letters lower-case to two characters (U+0130); then offsets would drift: ASCII only
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


# Where a name may start, found in C (the engine skips ahead to the first letters of these), in order.
# "code" is looked up from its end, the other anchors start their name.
# (written as a tree of prefixes: the engine tries one branch per letter, not every word)
_ANCHOR = re.compile(r"p(?:ass|w|in)|a(?:pi|ccess)|otp|secret|code")
_CODE_PREFIX = re.compile(
    r"(?:security|access|door|gate|alarm|verification|login|one-time|2fa|mfa|otp|sms|confirmation|pin)[ -]$"
)


def _prose_names(lowered: str) -> Iterator[re.Match[str]]:
    """Names standing as words (not inside "bypass" or "compass"), in order."""
    size = len(lowered)
    last = -1
    for anchor in _ANCHOR.finditer(lowered):
        start = anchor.start()
        if anchor.group() == "code":
            prefix = _CODE_PREFIX.search(lowered, max(0, start - 14), start)
            if prefix is None:
                continue
            start = prefix.start()
        if start <= last or (start > 0 and lowered[start - 1].isalpha()):
            continue
        named = _PROSE_NAME.match(lowered, start)
        if named is not None and (named.end() == size or not lowered[named.end()].isalpha()):
            last = start
            yield named


def names_a_secret(text: str) -> bool:
    """Whether a sentence names a secret that prose_passwords may find the value of."""
    if _PROSE_HINT.search(text) is None:  # most plain strings: one pass in C, no lower-casing
        return False
    return next(_prose_names(_lowered(text)), None) is not None


_PROSE_HINT = re.compile(r"(?i)p(?:ass|wd?\b|in)|otp|code|api|secret|access")


def prose_passwords(text: str) -> Iterator[Span]:
    """The value after a secret's name and a joining word in a sentence."""
    lowered = _lowered(text)
    covered = 0
    left = budget(text, 128)  # a password policy names one every few sentences; this is 8 a KiB
    for named in _prose_names(lowered):
        left -= 1
        if left < 0:  # dense with names of secrets: the rest at once
            yield named.start(), len(text)
            return
        if named.start() < covered:
            continue
        needs_digit = named.group(2) is not None
        span = _prose_value(text, named.end(), needs_digit, lowered, named.start())
        if span is not None:
            covered = span[1]
            yield span
        else:
            covered = named.end() + _WINDOW // 2  # the window read already: names in it are read with it


def _prose_value(text: str, start: int, needs_digit: bool, lowered: str, name_start: int) -> Span | None:
    """A value after a joiner. A plain word is taken only right after "my password is" (a possessive or
    an article before the name, the joiner right after it); otherwise the value must be quoted or hold
    something besides letters, as most passwords do."""
    chunk = text[start : start + _WINDOW]
    words = chunk.split(None, _MAX_WORDS)[:_MAX_WORDS]  # (split in C: the whitespace of \S is str.isspace's)
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        bare = word.lower().strip(",;")
        if (bare.endswith(":") and len(bare) > 1) or bare.endswith("="):
            joined = True  # "password:" written in prose
        elif bare in _JOINERS or bare in ("'s", "\u2019s"):
            joined = True
        elif bare.endswith(("'s", "\u2019s")) and index == 1:
            joined = True  # "my password's hunter2"
        else:
            joined = False
        if not joined:
            continue
        while index < len(words) and words[index].lower() in _FILLERS:
            index += 1
        if index >= len(words):
            return None
        value = words[index]
        span = _value_span(text, start + _offset(chunk, words, index), value)
        if span is None:
            continue
        taken = text[span[0] : span[1]]
        if needs_digit and not any(char.isdigit() for char in taken):
            return None
        quoted = span[0] > 0 and text[span[0] - 1] in _QUOTES
        if taken.isalpha() and not quoted and not (index == 1 + _filler_count(words) and _owned(lowered, name_start)):
            continue
        return span
    return None


def _offset(chunk: str, words: list[str], index: int) -> int:
    """Where the word `index` of the chunk's words starts: each is found after the one before it (only
    whitespace stands between them)."""
    end = 0
    for word in words[: index + 1]:
        end = chunk.find(word, end) + len(word)
    return end - len(words[index])


def _owned(lowered: str, name_start: int) -> bool:
    return _OWNER.search(lowered, max(0, name_start - 32), name_start) is not None


def _filler_count(words: list[str]) -> int:
    """Fillers right after the first word ("is now x"), so "the joiner right after the name" allows them."""
    count = 0
    while 1 + count < len(words) and words[1 + count].lower() in _FILLERS:
        count += 1
    return count


def _value_span(text: str, at: int, word: str) -> Span | None:
    """The value starting at `at`: a quoted string, or one word without a sentence's closing punctuation."""
    if word[0] in _QUOTES:
        closing = {"\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb"}.get(word[0], word[0])
        end = text.find(closing, at + 1, at + 1 + 256)
        if end > at + 1:
            return at + 1, end
    core = word.rstrip(".,;:!?)]}\"'`\u201d\u2019\u00bb")
    if not core:
        return None
    lowered = core.lower()
    if lowered in _NOT_A_VALUE or (lowered.isalpha() and lowered.endswith(("ed", "ing", "ly"))):
        return None
    return at, at + len(core)


# --- XML and HTML ------------------------------------------------------------------------------------------

_TAG = re.compile(r"<([A-Za-z_][\w:.-]{0,63}+)")
_TAG_REST = re.compile(r"[^<>]{0,2048}+>")
_ATTRIBUTE = re.compile(
    r"([\w:.-]{1,64}+)[ \t\r\n]*+=[ \t\r\n]*+(?:\"([^\"<>]{0,4096}+)\"|'([^'<>]{0,4096}+)'|([^\s\"'<>]{1,4096}+))"
)
_CONTENT = re.compile(r"[^<]{1,65536}+")
_CDATA_OPEN = "<![CDATA["
# Attributes that name what an element holds: <entry key="password">, <input type="password" value=...>.
_NAMING_ATTRIBUTES = frozenset({"name", "key", "type", "id", "field", "property", "header", "for", "label"})
_VALUE_ATTRIBUTES = frozenset({"value", "val", "content", "data-value"})


def elements(text: str, is_secret_name: IsSecretName, every_tag: bool = False) -> Iterator[Span]:
    """The content of an element whose name is a secret's, or whose naming attribute is; and the value
    attribute of a tag so named. Only the tags that may be so named are read one by one (_candidates),
    unless `every_tag` (what the candidates are tested against)."""
    position = 0
    left = budget(text)  # secret elements
    starts = None if every_tag else _candidates(text, is_secret_name)
    tags = budget(text, 8)  # when every tag is read: tags of any name (ordinary HTML: fewer)
    for start in starts if starts is not None else (tag.start() for tag in _TAG.finditer(text)):
        if start < position:  # (-1: an attribute outside any tag)
            continue
        if starts is None:
            tags -= 1
            if tags < 0:  # a tag every few characters: no markup, the rest at once
                yield start, len(text)
                return
        tag = _TAG.match(text, start)
        rest = _TAG_REST.match(text, tag.end()) if tag is not None else None
        if tag is None or rest is None:
            continue
        position = rest.end()
        name = tag.group(1).rsplit(":", 1)[-1]
        named = is_secret_name(name)
        value_span: Span | None = None
        for attribute in _ATTRIBUTE.finditer(text, tag.end(), rest.end() - 1):
            key = attribute.group(1).lower()
            index = next(i for i in (2, 3, 4) if attribute.group(i) is not None)
            if key in _NAMING_ATTRIBUTES and is_secret_name(attribute.group(index)):
                named = True
            elif key in _VALUE_ATTRIBUTES and attribute.end(index) > attribute.start(index):
                value_span = attribute.span(index)
        if not named:
            continue
        left -= 1
        if left < 0:  # dense with secret elements: the rest at once
            yield tag.start(), len(text)
            return
        if value_span is not None:
            yield value_span
        if text[rest.end() - 2 : rest.end()] == "/>":
            continue
        span = _content(text, position)
        if span is not None:
            position = max(position, span[1])
            yield span


# A naming attribute and its value, wherever written (searched in the lower-cased text: a case-blind pattern
# is tried at every position); only the name and '=' are taken, so the next search starts inside the value:
# a superset of what the tags' own reading finds, whatever its alignment.
_NAMING_ATTRIBUTE = re.compile(
    r"(?:name|key|type|id|field|property|header|for|label)[ \t\r\n]*+="
    r"(?=[ \t\r\n]*+(?:\"([^\"<>]{0,4096}+)\"|'([^'<>]{0,4096}+)'|([^\s\"'<>]{1,4096}+)))"
)
# More distinct secret tag names or naming values than this: every tag is read (with the budget of tags).
_MAX_DISTINCT = 4096


def _candidates(text: str, is_secret_name: IsSecretName) -> Iterator[int] | None:
    """Where the tags that may be named a secret's start, in order, found in C: the distinct tag names and
    naming attributes' values are judged once each, then only the tags holding a secret one are searched
    for, lazily (the reading stops at its budget). None when there are too many distinct secret names to
    search for, or naming values to keep."""
    names = _tag_names(text, is_secret_name)
    found: list[Iterator[int]] = []
    # ns:Token is judged as Token
    local = {name: name.rsplit(":", 1)[-1] for name in names if ":" in name} if ":" in "".join(names) else {}
    secret = secret_among(names.difference(local).union(local.values()), is_secret_name)
    secret_names = sorted(names.intersection(secret).difference(local))
    secret_names += sorted(name for name, last in local.items() if last in secret)
    if len(secret_names) > _MAX_DISTINCT:
        return None
    if secret_names:
        # a name cut at 64 characters by _TAG goes on: only a shorter one must end there
        whole = [re.escape(name) + (r"(?![\w:.-])" if len(name) < 64 else "") for name in secret_names]
        found.append(match.start() for match in re.compile(f"<(?:{'|'.join(whole)})").finditer(text))
    if "=" in text:
        where: dict[str, list[int]] = {}  # each distinct value, and where its attributes start
        for match in _NAMING_ATTRIBUTE.finditer(_lowered(text)):
            group = match.lastindex or 0
            where.setdefault(text[match.start(group) : match.end(group)], []).append(match.start())
            if len(where) > _MAX_DISTINCT:
                return None
        secret = secret_among([value for value in where if value], is_secret_name)
        valued = [positions for value, positions in where.items() if value in secret]
        found.append(text.rfind("<", 0, position) for position in heapq.merge(*valued))
    return heapq.merge(*found)


def _tag_names(text: str, is_secret_name: IsSecretName) -> set[str]:
    """The distinct tag names, or in a long text dense with tags only those whose last part (after a ':')
    starts a run of names holding a listed name (the judge's `runs`, found in C): the others are no secret's."""
    runs: Callable[[str], list[Span] | None] | None = getattr(is_secret_name, "runs", None)
    dense = len(text) >= _FEW_CHARS and text.count("<") * _DENSE >= len(text)
    found = runs(text) if runs is not None and dense else None
    if found is None:
        return set(_TAG.findall(text))
    names: set[str] = set()
    for start, _ in found:
        opening = text.rfind("<", max(0, start - 65), start) if start > 0 and text[start - 1] in "<:" else -1
        tag = _TAG.match(text, opening) if opening >= 0 else None  # (a tag's name holds no '<': its own)
        if tag is not None:
            names.add(tag.group(1))
    return names


# A shorter text, or one with tags further apart than _DENSE characters on average, has its few tag names
# collected at once (cheaper than looking for the runs holding a listed name, a pass over every byte).
_FEW_CHARS = 4096
_DENSE = 32


def _content(text: str, start: int) -> Span | None:
    if text.startswith(_CDATA_OPEN, start):
        first = start + len(_CDATA_OPEN)
        end = text.find("]]>", first, first + 65_536)
        end = end if end >= 0 else min(len(text), first + 65_536)
        return (first, end) if end > first else None
    content = _CONTENT.match(text, start)
    if content is None or not content.group().strip():
        return None
    return content.span()
