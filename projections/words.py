"""Words as memlog indexes and searches them: one folding for recall and archive search (no I/O).

A text's terms are its words of every script (Unicode word boundaries), case and accents folded,
dotted and plural acronyms joined ("A.I." is "AI", "PRs" is "PR"), a few function and asking words
dropped, and each word stemmed by the Snowball English stemmer (the `snowballstemmer` package, pure
Python): "mining" finds "mine", "stored" finds "store", "diamonds" finds "diamond". MySQL full-text
skips words under three characters and a long stop list, so a fact that is only "AI" cannot be found
(seed 003); here every word of one letter or more is kept.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import snowballstemmer

STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "you",
        "your",
        # words of asking, which say nothing about what is asked
        "about",
        "again",
        "any",
        "can",
        "could",
        "did",
        "how",
        "know",
        "please",
        "remember",
        "remind",
        "should",
        "tell",
        "there",
        "would",
        "s",  # of "Kira's", "it's"
        "t",  # of "don't"
        "ll",
        "re",
        "ve",
    }
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# "A.I.", "U.S.A": letters joined by dots are one word, as if written without them
_DOTTED = re.compile(r"(?<![^\W_])(?:[^\W\d_]\.){1,}[^\W\d_](?![^\W_])\.?", re.UNICODE)
# "PRs", "IDs", "APIs": an acronym's plural is the acronym
_ACRONYM_PLURAL = re.compile(r"^[^\W\d_a-z]{2,}'?s$", re.UNICODE)
_ENGLISH = snowballstemmer.stemmer("english")


def fold(text: str) -> str:
    """Case and accents folded: "CAFÉ" is "cafe"."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The Snowball English stem of a folded word; a word of another script is left as it is."""
    if not word.isascii():
        return word
    result: str = _ENGLISH.stemWord(word)
    return result


def words(text: str) -> list[str]:
    """The folded words of a text, stop words included, acronyms joined, not stemmed."""
    joined = _DOTTED.sub(lambda match: match.group().replace(".", ""), text)
    return [_word(raw) for raw in _WORD.findall(joined)]


def _word(raw: str) -> str:
    if _ACRONYM_PLURAL.match(raw):
        raw = raw.rstrip("s").rstrip("'")
    return fold(raw)


@lru_cache(maxsize=65_536)
def index_terms(text: str) -> tuple[str, ...]:
    """The terms a text is indexed and searched by (the same function on both sides)."""
    found = words(text)
    terms = [stem(word) for word in found if word not in STOP_WORDS]
    if not terms:  # a text of stop words only is still findable by them
        terms = [stem(word) for word in found]
    return tuple(terms)
