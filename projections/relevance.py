"""Words and Okapi BM25 for archive search (issue 35): pure rules, no I/O.

Words of every script. Text is NFKC-normalised, then folded and split as recall does
(projections/words.py: case and accents folded, café and cafe one word, acronyms joined).
Chinese, Japanese and Thai write no spaces between words, so a run of their characters is indexed as
its single characters and its character bigrams: no dictionary to ship, and a two-character word (most
Chinese words are) matches as a bigram, which ranks it above its characters found apart (bench/
search_eval.py measures the choice). Each word is stemmed with snowball (English for Latin script,
Russian for Cyrillic), and stop words (English, French, Russian, Chinese function characters and the
asking words of a question) are no content terms: they never find a candidate, and a query whose
content terms occur nowhere answers nothing; among the candidates its content terms found, they weigh
by their idf as any term does (BM25 gives a common word little weight anyway, and "quand", "под",
"between" do tell a French, Russian or English answer apart: bench/search_eval.py, "stops").

BM25 (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009) with
k1 1.2 and b 0.75, the usual defaults. A document is one exchange: its question, tool calls and answer
together, so the exchange is ranked once.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

from projections import words as shared_words
from schemas.errors import InvalidEvent

K1 = 1.2
B = 0.75
MAX_QUERY_TERMS = 50  # issue 41: a query's distinct content terms; more is refused (422 naming q)

_WORD = re.compile(r"[^\W_]+")
# Han (with its extensions), Hiragana, Katakana, Thai: scripts written without spaces between words
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f\U00020000-\U0002ffff]+")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")


def fold(text: str) -> str:
    """NFKC, then recall's folding (projections/words.py): case and accents folded."""
    return shared_words.fold(unicodedata.normalize("NFKC", text))


# Function and asking words: a question's "where did I say" must not outweigh what it asks about.
STOP_WORDS = shared_words.STOP_WORDS | frozenset(
    fold(w)
    for w in """
    a about above after again against all am an and any are aren as at be because been before being below
    between both but by can could did didn do does doesn doing don down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is isn it its itself just
    let me more most my myself no nor not now of off on once only or other our ours ourselves out over own
    re s same she should so some such t than that the their theirs them themselves then there these they
    this those through to too under until up very was wasn we were weren what when where which while who
    whom why will with won would you your yours yourself yourselves ll ve d m o y
    tell told say said know remember ask asked mention mentioned talk talked anything something thing
    things ever also get got one like yes okay ok oh well really think thought
    au aux avec ce ces cette dans de des du elle elles en est et eu il ils je la le les leur leurs lui ma
    mais me mes moi mon ne nos notre nous on ou où par pas pour qu que quel quelle quels quelles qui sa sans
    se ses son sur ta te tes toi ton tu un une vos votre vous était été être avoir ai as avait ont sont
    suis es sommes êtes fait faire dit dire quoi comment pourquoi quand y ça cela ceci l j
    и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было
    вот от меня еще нет о из ему теперь когда даже ну вдруг ли если уже или ни быть был него до вас
    нибудь опять уж вам ведь там потом себя ничего ей может они тут где есть надо ней для мы тебя их
    чем была сам чтоб без будто чего раз тоже себе под будет ж тогда кто этот того потому этого какой
    совсем ним здесь этом один почти мой тем чтобы нее сейчас были куда зачем всех никогда можно при
    наконец два об другой хоть после над больше тот через эти нас про всего них какая много разве три
    эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя такой им более всегда конечно
    всю между говорил сказал сказала говорила помнишь расскажи
    的 了 是 在 我 你 他 她 它 们 吗 呢 吧 啊 和 就 都 也 这 那 有 不 个 么 什 哪 谁 说 过 要 会 着 把 被 给 与
    什么 怎么 哪里 为什么 我们 你们 他们 这个 那个 没有 一个
    """.split()
)
_RUSSIAN = snowballstemmer.stemmer("russian")


def words(text: str) -> list[str]:
    """The folded words of a text in order, as recall folds them (projections/words.py: acronyms joined);
    a run of an unspaced script gives its characters and bigrams."""
    found: list[str] = []
    for word in shared_words.words(unicodedata.normalize("NFKC", text)):
        if not _UNSPACED.search(word):
            found.append(word)
            continue
        for part in re.split(f"({_UNSPACED.pattern})", word):
            if not part:
                continue
            if _UNSPACED.fullmatch(part):
                found.extend(part)
                found.extend(part[i : i + 2] for i in range(len(part) - 1))
            else:
                found.append(part)
    return found


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Recall's English stem for a Latin word (projections/words.py), the Russian one for a Cyrillic word."""
    if _CYRILLIC.search(word):
        return str(_RUSSIAN.stemWord(word))
    return shared_words.stem(word)


def terms(text: str) -> list[str]:
    """The content terms of a text, in order and repeated as they occur: stems of its words, stop words out."""
    return [stem(w) for w in words(text) if w not in STOP_WORDS]


def terms_with_stops(text: str) -> list[str]:
    """Every stem of a text, in order: the terms of a query of stop words alone."""
    return [stem(w) for w in words(text)]


def locate(text: str, wanted: Iterable[str]) -> int:
    """Where in `text` the first word with a wanted term starts (0 when none does): an excerpt's centre."""
    want = set(wanted)
    for found in _WORD.finditer(text):
        word = fold(found.group())
        if _UNSPACED.search(word):
            places = [i for t in want if (i := word.find(t)) >= 0]
            if places:
                return found.start() + min(places)
        elif stem(word) in want:
            return found.start()
    return 0


def index_terms(text: str) -> tuple[str, ...]:
    """Every distinct stem of the text, stop words included (a query of stop words alone, or a quoted
    phrase of them, still finds its candidates), for the candidate index."""
    return tuple(sorted({stem(w) for w in words(text)}))


@dataclass(frozen=True)
class Query:
    """A search's terms: the content terms (distinct, in order) and, for a query of stop words alone, those."""

    terms: tuple[str, ...]
    stop_only: bool
    raw: tuple[str, ...] = ()  # the folded words the terms came from
    stops: tuple[str, ...] = ()  # the stems of its stop words that are no content term: they only weigh

    @property
    def lookup(self) -> list[str]:
        """The index keys to find candidates by: each term, and each folded word (entries archived
        before stems were indexed hold their lower-cased ASCII tokens)."""
        return sorted(set(self.terms) | set(self.raw))


def query_of(text: str) -> Query:
    """InvalidEvent('q') past MAX_QUERY_TERMS distinct terms."""
    found = words(text)
    content = [w for w in found if w not in STOP_WORDS]
    stop_only = not content
    chosen = found if stop_only else content
    distinct = tuple(dict.fromkeys(stem(w) for w in chosen))
    if len(distinct) > MAX_QUERY_TERMS:
        raise InvalidEvent("q", f"has {len(distinct)} distinct terms; at most {MAX_QUERY_TERMS}")
    stops = () if stop_only else tuple(dict.fromkeys(s for w in found if (s := stem(w)) not in distinct))
    return Query(distinct, stop_only, tuple(dict.fromkeys(chosen)), stops[:MAX_QUERY_TERMS])


@dataclass(frozen=True)
class Stats:
    """The collection a query is scored against: how many documents, and their mean length in terms."""

    documents: int
    mean_length: float


def idf(documents: int, frequency: float) -> float:
    """BM25's inverse document frequency, kept positive (Lucene's form): a term in every document
    weighs little but never counts against a match."""
    return math.log(1.0 + (documents - frequency + 0.5) / (frequency + 0.5))


def frequencies(docs: Iterable[Bag], wanted: Iterable[str]) -> dict[str, int]:
    """Per wanted term, how many of the documents hold it."""
    want = set(wanted)
    return {term: sum(1 for doc in docs if doc.counts.get(term)) for term in want}


@dataclass(frozen=True)
class Bag:
    """A text's terms with their counts, and its length in terms: what BM25 reads of a document."""

    counts: Counter[str]
    length: int

    def __add__(self, other: Bag) -> Bag:
        # the larger copied (in C), the smaller added to it: Counter's `+` loops in Python over both
        big, small = sorted((self.counts, other.counts), key=len, reverse=True)
        counts = big.copy()
        counts.update(small)
        return Bag(counts, self.length + other.length)


_RAW = re.compile(r"[^\W_]+")
_DOT_LETTER = re.compile(r"\.[^\W\d_]")  # a literal first: the scan jumps from dot to dot, in C
_LETTER = re.compile(r"[^\W\d_]")
_DOTTED = re.compile(r"(?<![^\W_])(?:[^\W\d_]\.){1,}[^\W\d_](?![^\W_])\.?")  # as projections/words.py joins


@lru_cache(maxsize=131072)
def _terms_of(token: str) -> tuple[tuple[str, bool], ...]:
    """The token's stems, each with whether it is a stop word's."""
    return tuple((stem(w), w in STOP_WORDS) for w in words(token))


def _dotted(text: str) -> bool:
    """Whether a letter, a dot and a letter follow each other somewhere. A pattern that starts with a class
    tries it at every position (5 ms on 22 KB); this looks only after each dot (0.02 ms)."""
    return any(m.start() and _LETTER.match(text, m.start() - 1) for m in _DOT_LETTER.finditer(text))


def bag(text: str, *, stops: bool = False, stop_length: bool | None = None) -> Bag:
    """`terms(text)` counted (`terms_with_stops` with `stops`): each distinct token folded and stemmed
    once (a 22 KB text repeats its words), so scoring a candidate costs little more than finding its
    tokens. Its length counts stop words when `stop_length` (default: `stops`); a query with content
    terms measures its documents by their content terms alone, as when stop words were not counted."""
    joined = unicodedata.normalize("NFKC", text)
    if _dotted(joined):  # the full pattern costs more than the rest of the text's words
        joined = _DOTTED.sub(lambda m: m.group().replace(".", ""), joined)
    counted = stops if stop_length is None else stop_length
    counts: Counter[str] = Counter()
    length = 0
    for token, times in Counter(_RAW.findall(joined)).items():
        for term, stop in _terms_of(token):
            if stops or not stop:
                counts[term] += times
            if counted or not stop:
                length += times
    return Bag(counts, length)


def score(doc: Bag, weights: Mapping[str, float], stats: Stats) -> float:
    """The document's BM25 score for the query whose terms carry `weights` (their idf)."""
    if not doc.length:
        return 0.0
    norm = K1 * (1.0 - B + B * doc.length / max(stats.mean_length, 1.0))
    found = ((weights[t], doc.counts[t]) for t in weights if doc.counts.get(t))
    return sum(weight * n * (K1 + 1.0) / (n + norm) for weight, n in found)
