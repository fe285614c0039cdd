"""Where secrets sit in free text: each detector returns spans and costs time linear in the text. Pure.

Why linear: redaction runs on every traced run (up to 768 KiB) before it is produced, so a pattern whose cost
grows faster than its input lets one run stall the API and the worker. Every pattern here either starts with
a literal (searched by the regex engine's fast prefix scan) or with a look-behind that allows a start only at
the edge of a run of its characters, and every repetition is bounded or possessive, so no start position is
retried more than a bounded number of steps. Token-shaped secrets are judged token by token: the text is cut
once into maximal runs of token characters, and each run is classified by a prefix table, its shape, its
base64 content and its randomness, never by a pattern that could rescan a run from every position in it.

The providers' key formats are in projections/secret_providers.py, with their sources. presidio-analyzer's
(MIT) card and email recognizers gave the idea of checking a card number's Luhn digit and network prefix.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from itertools import accumulate, chain

from projections import secret_phrases
from projections.secret_providers import PROVIDER_RULES

Span = tuple[int, int]
IsSecretName = Callable[[str], bool]

# The longest value taken after a secret name, and the longest user info in a URL: far beyond any real one.
MAX_VALUE = 4096
# base64 inside base64 is opened once more; deeper wrapping is not worth the time.
MAX_DECODE_DEPTH = 2
# A longer base64 token is not decoded: it is judged by its randomness like any blob (base64 of text that
# holds a secret is random-looking, and is redacted whole), so one token cannot cost a decode and a scan.
MAX_DECODED_TOKEN = 65_536
# Randomness is judged on the start of a token: enough to tell a blob from a path or a name.
RANDOMNESS_SAMPLE = 256

_PROVIDER = re.compile("|".join(f"(?:{pattern})" for _, pattern in PROVIDER_RULES))

# A token: a maximal run of the characters keys, tokens and base64 are written with ('=' only as padding).
_TOKEN_CHARS = "A-Za-z0-9+/_.~-"
# (A run is found after the character before it, not by a look-behind: the engine then skips ahead to
# characters outside the run instead of trying every letter. Its '=' padding is looked at, not taken, so the
# next run still finds the character before it.)
_TOKEN = re.compile(rf"[^{_TOKEN_CHARS}]([{_TOKEN_CHARS}]{{16,}}+)(?=(={{0,2}}))")
_TOKEN_HEAD = re.compile(rf"([{_TOKEN_CHARS}]{{16,}}+)(?=(={{0,2}}))")
# Only the tokens secret_token may take are judged in Python: told in C, at each token's start, by shapes
# every secret it takes has (a superset: a token left out is one secret_token rejects, checked by a test).
# - a provider's prefix, at the start or after a '/' (a key in a path: a segment of 16 or more);
# - base64 of text (no hex digest): one alphabet, its first two characters decoding to the start of UTF-8
#   text (an ASCII byte, no control, then neither a control nor a continuation byte; or a lead byte then
#   a continuation byte);
# - random-looking: 24 characters or more, and the classes (upper, lower, digit, punctuation skipped)
#   change often enough: 14 distinct characters (MIN_ENTROPY_BITS) with 6 kinds of punctuation in 24 are 10
#   letters and digits or more, so 4 runs of a class (MIN_CLASS_CHANGES), 5 unless 13 are punctuation.
_PUNCTUATION = r"[+/_.~-]"
_RUN = rf"{_PUNCTUATION}*+(?:{'|'.join(f'{c}++(?:{_PUNCTUATION}*+{c}++)*+' for c in ('[a-z]', '[A-Z]', '[0-9]'))})"
_MAY_BE_SECRET = (
    rf"(?=[{_TOKEN_CHARS}]{{16}})"
    rf"(?:(?!(?:0x)?[0-9a-fA-F-]++(?![={_TOKEN_CHARS}]))"
    r"(?:(?=(?:[CDI-Za-f](?![BIJKLRYZabhopqrx4-7])[A-Za-z0-9+/_-]|[w-z0-9][IJKLYZabopqr4-7])(?:[A-Za-z0-9+/]*+|[A-Za-z0-9_-]*+)(?![A-Za-z0-9+/_.~-]))"
    rf"|(?=[{_TOKEN_CHARS}]{{24}})(?=(?:{_RUN}){{4}})(?=(?:{_RUN}){{5}}|(?:[A-Za-z0-9]*+{_PUNCTUATION}){{13}}))"
    rf"|(?={_PROVIDER.pattern})|(?=(?:[A-Za-z0-9+_.~-]*+/)+?(?=[A-Za-z0-9+_.~-]{{16}})(?:{_PROVIDER.pattern})))"
)
_CANDIDATE = re.compile(rf"[^{_TOKEN_CHARS}]{_MAY_BE_SECRET}([{_TOKEN_CHARS}]{{16,}}+)(?=(={{0,2}}))")
_CANDIDATE_HEAD = re.compile(rf"{_MAY_BE_SECRET}([{_TOKEN_CHARS}]{{16,}}+)(?=(={{0,2}}))")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Decoded base64 that is one `user:password` pair: the content of HTTP Basic credentials.
_CREDENTIAL_PAIR = re.compile(r"[^\s:]{1,256}:[^\s]{1,1024}")
# Hex digests, UUIDs and plain numbers are not judged by randomness: they carry no credential by themselves
# (commit ids, content hashes, run ids) and traces need them. A hex key is found by its context instead.
_HEX_BYTES = re.compile(rb"[0-9a-fA-F]+")
_HEX_TOKEN = re.compile(r"(?:0x)?[0-9a-fA-F-]+")
# An SSH public key's base64 body: public by design.
_SSH_PUBLIC = ("AAAAB3NzaC1", "AAAAC3NzaC1", "AAAAE2VjZHNh")
# Randomness is weighed in bytes (translated and counted in C): upper case, lower case, digit.
_NOT_ALNUM_BYTES = bytes(code for code in range(128) if not chr(code).isalnum())
_CLASS_OF = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    b"U" * 26 + b"l" * 26 + b"d" * 10,
)
_CLASS_CHANGES = (b"Ul", b"Ud", b"lU", b"ld", b"dU", b"dl")
_WORDY = re.compile(rb"[A-Z]?[a-z]{3,}|[A-Z]{3,}")

# A random-looking token (letters and digits only are weighed, so a URL's punctuation does not count): at least
# this long; changing between upper case, lower case and digits at least this often (random base62 changes at
# about 6 characters in 10, identifiers at 2 to 3); at most this share of it in words (three letters or more);
# and this many bits of Shannon entropy per character. Measured on 6,000 generated keys of each length and
# 42,196 tokens of 24+ characters from Python packages' source: 13 (0.03%) of the latter are taken for keys;
# 6% of random base62 keys of 24 characters, 4% of 32 and 2% of 40 are not, and are found by context only.
MIN_RANDOM_LENGTH = 24
MIN_CLASS_CHANGES = 0.35
MAX_WORDY = 0.6
MIN_ENTROPY_BITS = 3.8

_PEM_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_URL_USERINFO = re.compile(r"://([^\s/?#\"'<>\[\]{}|\\^`]{1,256})@")
# Keys with an '=' inside (which ends a token): found in the text, after their literal prefix.
_INNER_EQUALS = re.compile(r"ATATT3[A-Za-z0-9_=-]{50,1024}+")  # atlassian api tokens
_WEBHOOKS = (
    re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9/_-]{1,256}+)"),
    re.compile(r"discord(?:app)?\.com/api/webhooks/([A-Za-z0-9/_-]{1,256}+)"),
)
# A query parameter's value, judged after percent-decoding (a key with '/', '+' or '=' is written %2F, %2B, %3D).
_QUERY_VALUE = re.compile(r"[?&;][A-Za-z0-9_.\[\]~-]{1,64}+=([^&#\s\"'<>]{1,8192}+)")
_TELEGRAM = re.compile(r":AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])")  # after the bot's 8 to 10 digits
_AUTH_SCHEME = re.compile(r"(Basic|Bearer|bearer|BEARER|Token)[ ]{1,4}+([A-Za-z0-9+/_.~-]{8,4096}+=*)")
_EMAIL_DOMAIN = re.compile(r"@(?:[A-Za-z0-9-]{1,63}+\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9-])")
# `name = value` (or :, =>, :=, ==) as in env files, YAML, JSON written as text, query strings, headers and
# keyword arguments; the name may be quoted, its quote escaped (JSON inside a JSON string). The search jumps
# from sign to sign (instead of trying a name at every letter) and reads the name backwards from its sign, in
# the reversed text.
_SIGN = re.compile(r"(?:=>|:=|==|=|:)(?!//)")
_NAME_REVERSED = re.compile(
    r"[ \t]{0,8}+([\"'`]?\\?)([\w.\u00ad\u200b-\u200d\u2060\ufeff-]{0,63}[^\W\d]-{0,2})(?![\w.$-])"
)
# Every name before a sign, read in the reversed text from the sign: a superset of what _NAME_REVERSED takes
# (a name of up to 66 characters, as it reads one, with its dashes).
_NAMES_BEFORE_SIGNS = re.compile(r"(?:>=|=:|==|=|:)[ \t]{0,8}+[\"'`]?\\?([\w.\u00ad\u200b-\u200d\u2060\ufeff-]{1,66}+)")
_LEADING_DASHES = re.compile(r"^-+", re.MULTILINE)
# `--password hunter2`: a long flag, then its value after a space.
_FLAG = re.compile(r"--([A-Za-z][A-Za-z0-9_-]{0,63}+)[ \t]{1,8}+(?=[^\s-])")
_CURL_USER = re.compile(r"(?:-u|--user)[ \t]{1,8}+[\"']?([^\s\"']{1,1024}+)")
_NETRC = re.compile(r"login[ \t]+[^\s]{1,256}+[ \t]+password[ \t]+([^\s]{1,1024}+)")
_SPACES = re.compile(r"[ \t]{0,8}")
_UNQUOTED = re.compile(r"[^\s\"'`,;<>(){}\[\]\\]{1,4096}+")
_UNQUOTED_IN_QUERY = re.compile(r"[^\s\"'`,;<>(){}\[\]\\&#]{1,4096}+")
_REST_OF_LINE = re.compile(r"[^\r\n]{1,4096}+")
# Read backwards from a position in the reversed text: an email's local part, a Telegram bot's id.
_LOCAL_PART_REVERSED = re.compile(r"[A-Za-z0-9._%+-]{1,64}+(?![A-Za-z0-9._%+-])")
_BOT_ID_REVERSED = re.compile(r"[0-9]{8,10}+(?![0-9])")
# Characters of a name (or a number) that a match may not start right after.
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
# Names whose value runs to the end of the line (or of the quoted string the header is written in).
HEADER_NAMES = frozenset({"authorization", "proxyauthorization", "cookie", "setcookie"})
# What may stand before a name at the start of a line whose value runs to the end of it.
LINE_PREFIXES = frozenset({"", "export", "set", "-", "#"})
# Card networks by their first digits (ISO/IEC 7812 issuer identification numbers).
_CARD_PREFIXES = (
    *("4", "51", "52", "53", "54", "55", "22", "23", "24", "25", "26", "27"),  # visa, mastercard
    *("34", "37", "30", "36", "38", "39", "35", "6"),  # amex, diners, jcb, discover, unionpay, maestro
)
# Strings no detector can find anything in, told apart in one step (most short values of a tool's result):
# words of at most 15 letters between spaces and light punctuation (no token of 16, no digits, no sign); and
# hex with dashes (UUIDs, digests: not secrets by themselves, see _HEX_BYTES) holding a letter (so not a card number).
_PLAIN_WORDS = re.compile(r"[ ,!?()']*+(?:[A-Za-z]{1,15}+[ ,!?()']++)*+[A-Za-z]{0,15}+")
_HEX_WORD = re.compile(r"(?=[0-9-]*+[a-fA-F])[0-9a-fA-F-]{1,128}+")


def plain(text: str) -> bool:
    """True when no detector can find anything in `text`, told at once (most short values)."""
    if _HEX_WORD.fullmatch(text) is not None:
        return True
    return _PLAIN_WORDS.fullmatch(text) is not None and not secret_phrases.names_a_secret(text)


def find(text: str, is_secret_name: IsSecretName, depth: int = 0, every_detector: bool = False) -> list[Span]:
    """Every span of `text` that holds a secret, in no particular order; spans may overlap. A plain URL is
    read only by the detectors that may find something in it, unless `every_detector` (tested against)."""
    if plain(text):
        return []
    if not every_detector and _PLAIN_URL.fullmatch(text) is not None:
        return _in_plain_url(text, depth, is_secret_name)
    spans: list[Span] = []
    if "-----BEGIN" in text:
        spans.extend(_pem_blocks(text))
        if spans and spans[-1][1] == len(text):
            text = text[: spans[-1][0]]  # a key with no END is redacted to the end: only what is before it is read
    spans.extend(_tokens(text, depth, is_secret_name))
    spans.extend(secret_phrases.cards(text, card_number))
    spans.extend(secret_phrases.prose_passwords(text))
    if "<" in text:
        spans.extend(secret_phrases.elements(text, is_secret_name))
    reversed_text = text[::-1] if ("=" in text or ":" in text or "@" in text) else ""
    if reversed_text:
        spans.extend(_assignments(text, reversed_text, is_secret_name))
    if "--" in text:
        spans.extend(_flags(text, is_secret_name))
    if "://" in text:
        spans.extend(match.span(1) for match in _URL_USERINFO.finditer(text))
        for webhook in _WEBHOOKS:
            spans.extend(match.span(1) for match in webhook.finditer(text))
    if "@" in text:
        spans.extend(_emails(text, reversed_text))
    if "%" in text and depth < MAX_DECODE_DEPTH:
        spans.extend(_encoded_query_values(text, depth, is_secret_name))
    if ":AA" in text:
        spans.extend(_telegram(text, reversed_text))
    if "-u" in text:
        spans.extend(_groups(_CURL_USER, text, lambda value: ":" in value))
    if "login" in text:
        spans.extend(_groups(_NETRC, text))
    if "ATATT3" in text:
        spans.extend(match.span() for match in _INNER_EQUALS.finditer(text))
    if "Basic" in text or "earer" in text or "EARER" in text or "Token" in text:
        spans.extend(_auth_schemes(text))
    return spans


# A URL of token characters only, at most 191: no space (prose, flags, curl, netrc, auth schemes and PEM
# need one), no sign but the scheme's ':' before '//' (_SIGN skips it; no ':AA'), no '<', '@', '?' or '%',
# and fewer than 64 names of 3 characters (prose_passwords' budget is never spent). (A test: the same spans.)
_PLAIN_URL = re.compile(r"https?://[A-Za-z0-9._~/-]{0,183}")


def _in_plain_url(text: str, depth: int, is_secret_name: IsSecretName) -> list[Span]:
    spans = [*_tokens(text, depth, is_secret_name), *secret_phrases.cards(text, card_number)]
    spans.extend(match.span(1) for webhook in _WEBHOOKS for match in webhook.finditer(text))
    spans.extend(match.span() for match in _INNER_EQUALS.finditer(text))
    return spans


def _groups(pattern: re.Pattern[str], text: str, keep: Callable[[str], bool] | None = None) -> Iterator[Span]:
    """Group 1 of each match that starts a word (the patterns start with a literal, for speed)."""
    for match in pattern.finditer(text):
        start = match.start()
        if (start == 0 or text[start - 1] not in _NAME_CHARS) and (keep is None or keep(match.group(1))):
            yield match.span(1)


def _encoded_query_values(text: str, depth: int, is_secret_name: IsSecretName) -> Iterator[Span]:
    """Query values holding a secret once percent-decoded. The values holding an escape are decoded together,
    one to a line (each distinct value once), _QUERY_BATCH at a time, and searched once a batch; what that
    finds is mapped back to the values it lies in, so a text of many encoded values costs one decoding and
    one search. A value that
    decodes to a line break (%0A) is searched alone; past `budget` of those, the rest of them at once, and
    so past `budget` values found (then the batches left are not searched)."""
    encoded = [value for value in _QUERY_VALUE.findall(text) if "%" in value]
    where = [index for index, value in enumerate(encoded) if "%0A" not in value and "%0a" not in value]
    values = list(dict.fromkeys(encoded[index] for index in where))  # each distinct one searched once
    found_in: set[str] = set()  # values found to hold a secret
    left = secret_phrases.budget(text)
    for batch in range(0, len(values), _QUERY_BATCH):  # (a text dense with values found: the rest at once)
        lines = values[batch : batch + _QUERY_BATCH]
        decoded = _unquote_loose("\n".join(lines))
        found = find(decoded, is_secret_name, depth + 1)
        if found:
            starts = list(accumulate((len(line) + 1 for line in decoded.split("\n")[:-1]), initial=0))
            for start, end in found:
                first = bisect_right(starts, start) - 1
                found_in.update(lines[first : max(first + 1, bisect_right(starts, end - 1))])
        if len(found_in) > left:
            found_in.update(values[batch + _QUERY_BATCH :])
            break
    hit = {index for index in where if encoded[index] in found_in} if found_in else set()  # in `encoded`
    for index, value in enumerate(encoded) if len(where) < len(encoded) else ():
        if "%0A" in value or "%0a" in value:
            left -= 1
            if left < 0 or find(_unquote_loose(value), is_secret_name, depth + 1):
                hit.add(index)
    if hit:  # past `budget` values holding one (a text of them), the rest at once
        left = secret_phrases.budget(text)
        spans = (match.span(1) for match in _QUERY_VALUE.finditer(text) if "%" in match.group(1))
        for index, span in enumerate(spans):
            if index in hit:
                left -= 1
                if left < 0:
                    yield span[0], len(text)
                    return
                yield span


_QUERY_BATCH = 8192  # encoded query values decoded and searched together, at most
_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})++")
# A '%' that starts no escape, in UTF-8.
_LONE_PERCENT = re.compile(rb"%(?![0-9A-Fa-f]{2})")


def unquote(text: str) -> str:
    """Percent-decoding as urllib.parse.unquote does it (UTF-8, errors replaced)."""
    if "%" not in text:
        return text
    try:
        return _unquote_utf8(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate (urllib keeps it as it is): a run of escapes at a time
        return _ESCAPES.sub(lambda run: bytes.fromhex(run.group().replace("%", "")).decode("utf-8", "replace"), text)


def _unquote_loose(text: str) -> str:
    """unquote, but a lone surrogate becomes U+FFFD (nothing a detector looks for): always in C."""
    return _unquote_utf8(text.encode("utf-8", "surrogatepass")) if "%" in text else text


def _unquote_utf8(raw: bytes) -> str:
    """Percent escapes decoded in C, by the quoted-printable decoder: its '=' escaped first (=3D), a '%'
    that starts no escape written as one (=25), then each '%' read as '='. The bytes are decoded once; a
    literal character's UTF-8 starts a sequence of its own, so a broken escaped one ends where urllib's does."""
    quoted = _LONE_PERCENT.sub(b"=25", raw.replace(b"=", b"=3D")).replace(b"%", b"=")
    return binascii.a2b_qp(quoted).decode("utf-8", "replace")


def _pem_blocks(text: str) -> Iterator[Span]:
    """A private key block from BEGIN to END; a block with no END is redacted to the end of the text."""
    position = 0
    while (begin := _PEM_BEGIN.search(text, position)) is not None:
        end = text.find("-----END", begin.end())
        if end < 0:
            yield begin.start(), len(text)
            return
        close = text.find("-----", end + 8)
        position = len(text) if close < 0 else close + 5
        yield begin.start(), position


def _tokens(text: str, depth: int, is_secret_name: IsSecretName, every_token: bool = False) -> Iterator[Span]:
    """Tokens that are secrets; past one found for each 512 characters (a dump of keys), the rest at once.
    Only the candidates (_CANDIDATE) are judged, unless `every_token` (what the candidates are tested against)."""
    left = secret_phrases.budget(text)
    first, then = (_TOKEN_HEAD, _TOKEN) if every_token else (_CANDIDATE_HEAD, _CANDIDATE)
    head = first.match(text)
    for match in chain((head,), then.finditer(text)) if head is not None else then.finditer(text):
        token = match.group(1) + match.group(2)
        start = match.start(1)
        if secret_token(token, depth, is_secret_name):
            left -= 1
            if left < 0:
                yield start, len(text)
                return
            yield start, start + len(token)
        elif "/" in token:  # a key in a path: /bot<token>/, /keys/<key>
            for segment in token.split("/"):
                if len(segment) >= 16 and _PROVIDER.match(segment):
                    yield start, start + len(segment)
                start += len(segment) + 1


def secret_token(token: str, depth: int, is_secret_name: IsSecretName) -> bool:
    """A provider key, a JWT, base64 wrapping a secret, or a long random string."""
    if _PROVIDER.match(token):
        return True
    if _HEX_TOKEN.fullmatch(token) is not None:
        return False  # a digest, a UUID (see _HEX_BYTES): and as base64 it spells no text worth decoding
    decoded = _base64_text(token)
    if decoded is not None:
        # judged by what it holds: base64 of ordinary text is ordinary
        return _CREDENTIAL_PAIR.fullmatch(decoded) is not None or (
            depth < MAX_DECODE_DEPTH and bool(find(decoded, is_secret_name, depth + 1))
        )
    return random_looking(token)


def _base64_text(token: str, min_length: int = 16) -> str | None:
    """The text a base64 (or base64url) token encodes, if it encodes printable UTF-8 text."""
    core = token.rstrip("=")
    if not min_length <= len(core) <= MAX_DECODED_TOKEN or len(core) % 4 == 1:
        return None
    if _BASE64.fullmatch(core):
        altchars = b"+/"
    elif _BASE64URL.fullmatch(core):
        altchars = b"-_"
    else:
        return None
    try:
        text = base64.b64decode(core + "=" * (-len(core) % 4), altchars).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return None if _CONTROL.search(text) else text


def random_looking(token: str) -> bool:
    """Long, random-looking and not made of words: a key without a prefix (AWS secret keys, Mistral, Cloudflare)."""
    core = token.rstrip("=")[:RANDOMNESS_SAMPLE]
    if len(core) < MIN_RANDOM_LENGTH or core.startswith(_SSH_PUBLIC):
        return False
    letters = core.encode("ascii", "ignore").translate(None, _NOT_ALNUM_BYTES)  # its ASCII letters and digits
    if not letters or _HEX_BYTES.fullmatch(letters.removeprefix(b"0x")):
        return False
    classes = letters.translate(_CLASS_OF)
    # (a word is 3 letters of one case at least: without such a run, none is looked for)
    wordy = 0 if b"lll" not in classes and b"UUU" not in classes else len(letters) - len(_WORDY.sub(b"", letters))
    if wordy > MAX_WORDY * len(letters):
        return False  # words: a path, a name, an identifier
    if sum(kind in classes for kind in b"Uld") < 2:
        return False
    # runs of one class: one more than the changes, each pair of classes counted in C (a pair of two
    # different classes cannot overlap itself)
    if 1 + sum(map(classes.count, _CLASS_CHANGES)) < MIN_CLASS_CHANGES * len(letters):
        return False
    size = len(core)
    entropy = -sum(count / size * math.log2(count / size) for count in map(core.count, set(core)))
    return entropy >= MIN_ENTROPY_BITS


def _assignments(
    text: str, reversed_text: str, is_secret_name: IsSecretName, every_sign: bool = False
) -> Iterator[Span]:
    """Values after a secret name. The search resumes after each value taken, so no text is read twice.
    First every name written before a sign is collected in C (from the reversed text, starting at the
    signs; in a long text, only those ending a run of names that holds a listed name, found by the
    judge's `runs`): when none of the distinct names is a secret's, no sign is read one by one; when a few are, only
    the signs after one of them (found in C), unless `every_sign` (what that is tested against)."""
    names = _names_holding_keys(text, is_secret_name)
    every_name = names is None
    if names is None:
        names = _names_before_signs(reversed_text)
    secret = secret_phrases.secret_among(names, is_secret_name)
    if not secret:
        return
    size = len(text)
    position = 0
    spots = None if every_sign else _signs_after(text, secret)
    if spots is None and not every_name:  # every sign read: the names known not to be secrets' are skipped
        names = _names_before_signs(reversed_text)
    while (sign := _SIGN.search(text, position) if spots is None else _next_sign(text, spots, position)) is not None:
        position = sign.end()
        named = _NAME_REVERSED.match(reversed_text, size - sign.start())
        if named is None:
            continue
        name = named.group(2)[::-1].lstrip("-")
        if name not in secret and (name in names or not is_secret_name(name)):
            continue
        spaces = _SPACES.match(text, position)
        value_start = spaces.end() if spaces is not None else position
        header = _normal(name) in HEADER_NAMES
        span = _value_after(text, size - named.end(2), value_start, bool(named.group(1)), header)
        if span is not None:
            position = max(position, span[1])
            yield span


def _names_before_signs(reversed_text: str) -> set[str]:
    """Every name written before a sign (read in the reversed text: reversed back and their dashes dropped at
    once, in C, as the lines of their joined text)."""
    return set(_LEADING_DASHES.sub("", "\n".join(set(_NAMES_BEFORE_SIGNS.findall(reversed_text)))[::-1]).split("\n"))


# Texts shorter than this, or with signs further apart than _DENSE characters on average, have every name
# collected (few names); in the others, looking for the runs of names holding a listed name (a pass in C
# over every byte) costs less than collecting and normalising every name.
_FEW_CHARS = 4096
_DENSE = 32
# What may stand between a name and its sign (as _NAMES_BEFORE_SIGNS reads it from the sign): a superset.
_TO_SIGN = re.compile(r"\\?[\"'`]?[ \t]{0,8}[=:]")


def _names_holding_keys(text: str, is_secret_name: IsSecretName) -> set[str] | None:
    """The names before signs that hold a listed name (a superset of the secret ones among those
    _names_before_signs collects), from the runs of names the judge finds holding one (`runs`, as a
    Redactor's does, in C): a name before a sign is the end of such a run, at most 66 characters, its
    dashes dropped. None when the judge offers no runs or finds too many, or for a short or sparse text."""
    runs: Callable[[str], list[Span] | None] | None = getattr(is_secret_name, "runs", None)
    if runs is None or len(text) < _FEW_CHARS or (text.count("=") + text.count(":")) * _DENSE < len(text):
        return None
    found = runs(text)
    if found is None:
        return None
    return {text[max(start, end - 66) : end].lstrip("-") for start, end in found if _TO_SIGN.match(text, end)}


# Characters a name may hold that the reading of a name before a sign may stop after (so it could read a
# name that was not collected, after one of them): with them in a text, every sign is read, to be safe.
_INVISIBLE = re.compile(r"[\u00ad\u200b-\u200d\u2060\ufeff]")
_MAX_SECRET_NAMES = 64
_NAME_REACH = 80  # a name, its quote and spaces before a sign are at most this long (_NAME_REVERSED)


def _signs_after(text: str, secret: set[str]) -> re.Pattern[str] | None:
    """A secret name, its quote and spaces, ending where a sign starts: a superset of the signs _assignments
    takes. None when every sign must be read (many secret names, or a name read may not be collected)."""
    if len(secret) > _MAX_SECRET_NAMES or _INVISIBLE.search(text) is not None:
        return None
    names = "|".join(re.escape(name) for name in sorted(secret, key=len, reverse=True))
    return re.compile(rf"(?:{names})\\?[\"'`]?[ \t]{{0,8}}(?=[=:])")


def _next_sign(text: str, spots: re.Pattern[str], position: int) -> re.Match[str] | None:
    """The first sign at or after `position` that a spot ends at (searched from where its name may start)."""
    at = max(0, position - _NAME_REACH)
    while (spot := spots.search(text, at)) is not None:
        end = spot.end()
        if end >= position and (sign := _SIGN.match(text, end)) is not None:
            return sign
        at = end + 1  # (a spot ending at a later sign starts after this one's sign)
    return None


def _flags(text: str, is_secret_name: IsSecretName) -> Iterator[Span]:
    covered = 0
    for match in _FLAG.finditer(text):
        start = match.start()
        if start < covered or (start > 0 and text[start - 1] in _NAME_CHARS) or not is_secret_name(match.group(1)):
            continue
        span = _value_after(text, start, match.end(), False, False)
        if span is not None:
            covered = span[1]
            yield span


def _value_after(text: str, name_start: int, start: int, name_quoted: bool, header: bool) -> Span | None:
    """The value written after a secret name: quoted, to the end of the line, or one word."""
    before = text[name_start - 1] if name_start > 0 else "\n"
    if header:
        # `Authorization: Basic ...`, perhaps inside a quoted string: `-H "Authorization: Bearer ..."`
        rest = _REST_OF_LINE.match(text, start)
        if rest is None:
            return None
        end = rest.end()
        if before in "\"'`" and not name_quoted:
            closing = text.find(before, start, end)
            end = closing if closing >= 0 else end
        return (start, end) if end > start else None
    quote = ""
    if text.startswith('\\"', start):
        quote = '\\"'
    elif text[start : start + 1] in ('"', "'", "`"):
        quote = text[start]
    if quote:
        first = start + len(quote)
        line_end = text.find("\n", first, first + MAX_VALUE)
        limit = line_end if line_end >= 0 else min(len(text), first + MAX_VALUE)
        closing = text.find(quote, first, limit)
        end = closing if closing >= 0 else limit
        return (first, end) if end > first else None
    # at the start of a line (after `export`, `set`, a YAML dash): KEY=value in env text, `key: value` in YAML
    window = max(0, name_start - 16)
    newline = text.rfind("\n", window, name_start)
    at_line_start = (newline >= 0 or window == 0) and text[newline + 1 : name_start].strip() in LINE_PREFIXES
    if at_line_start and before not in "?&":
        value = _REST_OF_LINE.match(text, start)
        if value is not None:
            return start, start + len(value.group().rstrip())
        return None
    value = (_UNQUOTED_IN_QUERY if before in "?&;" else _UNQUOTED).match(text, start)
    return value.span() if value is not None else None


def _auth_schemes(text: str) -> Iterator[Span]:
    """`Basic <base64 of user:password>`, `Bearer <token>`, `Token <token>`, wherever they are written."""
    for match in _AUTH_SCHEME.finditer(text):
        if match.start() > 0 and text[match.start() - 1] in _LETTERS:
            continue
        scheme, credential = match.group(1), match.group(2).rstrip(".")  # a sentence's full stop is not in it
        start = match.start(2)
        if scheme == "Basic":
            decoded = _base64_text(credential, min_length=4)
            if decoded is not None and ":" in decoded:
                yield start, start + len(credential)
        elif not credential.isalpha() or (len(credential) >= 20 and not credential.islower()):
            yield start, start + len(credential)  # "bearer instruments", "Token refills" are prose


def card_number(digits: str) -> bool:
    """13 to 19 digits with a card network's prefix and a valid Luhn check digit."""
    return 13 <= len(digits) <= 19 and digits.startswith(_CARD_PREFIXES) and luhn(digits)


# Luhn's doubled digit (2d, less 9 above 9) is one digit again: doubling is a byte translation.
_LUHN_DOUBLED = bytes.maketrans(b"0123456789", b"0246813579")


def luhn(digits: str) -> bool:
    """The Luhn check, summed in C: every second digit from the right doubled (by translation), the
    ASCII codes summed and each '0' taken off."""
    raw = digits.encode("ascii")
    return (sum(raw[-1::-2]) + sum(raw[-2::-2].translate(_LUHN_DOUBLED)) - 48 * len(raw)) % 10 == 0


def _emails(text: str, reversed_text: str) -> Iterator[Span]:
    """Email addresses; past one for each 64 characters (a list of addresses), the rest at once."""
    size = len(text)
    left = secret_phrases.budget(text, 64)
    local_part = _LOCAL_PART_REVERSED.match
    for match in _EMAIL_DOMAIN.finditer(text):
        at = match.start()
        local = local_part(reversed_text, size - at)
        if local is None:
            continue
        start = size - local.end()
        left -= 1
        if left < 0:
            yield start, size
            return
        if at - start != 3 or not text.startswith("git", start):  # git@host:org/repo names a repository
            yield start, match.end()


def _telegram(text: str, reversed_text: str) -> Iterator[Span]:
    size = len(text)
    for match in _TELEGRAM.finditer(text):
        bot = _BOT_ID_REVERSED.match(reversed_text, size - match.start())
        if bot is not None:
            yield match.start() - len(bot.group()), match.end()


def _normal(name: str) -> str:
    return "".join(char for char in name.lower() if char.isalnum())
