"""Archive search's ranking (issue 35): one BM25 document per exchange, phrases first. Pure rules.

The words and the BM25 arithmetic are in projections/relevance.py; matching and excerpts in
projections/archives.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from projections import relevance
from projections.archives import ConversationRef, Entry, Key, Match, normal, rank_key
from schemas.errors import InvalidEvent


@dataclass(frozen=True)
class Hit:
    entry: Entry  # the exchange's best entry
    found: Match
    key: Key
    also: tuple[Entry, ...] = ()  # the exchange's other entries that match


Grouping = Literal["exchange", "entry"]


def exchange_of(entry: Entry) -> tuple[ConversationRef, str]:
    """The exchange an entry belongs to (an entry of none stands alone): what a candidate cap counts."""
    return (entry.ref, entry.exchange_id if entry.exchange_id is not None else f"entry:{entry.entry_id}")


def partial(candidates: Iterable[Entry], cap: int) -> bool:
    """Whether candidates read with a cap of `cap` + 1 exchanges hit it: the ranking saw only part of the matches."""
    return len({exchange_of(e) for e in candidates}) > cap


def unit_of(entry: Entry, group: Grouping) -> tuple[ConversationRef, str, str]:
    """What one result stands for: the exchange (its question, tool calls and answer), or the entry."""
    if group == "exchange" and entry.exchange_id is not None:
        return (entry.ref, "x", entry.exchange_id)
    return (entry.ref, "e", entry.entry_id)


def rank(
    query: str,
    candidates: Iterable[Entry],
    *,
    after: Key | None,
    limit: int,
    key: Callable[[Match, Entry], Key] = rank_key,
    documents: int | None = None,
    group: Grouping = "exchange",
) -> list[Hit]:
    """The page of matches after `after` in rank order (`key`), from one consistent candidate set.

    One hit per exchange (`group`): the exchange is one BM25 document, shown by its best entry (a
    phrase match, else the entry whose terms weigh most), its other matching entries named under it.
    `documents`: how many exchanges the scope holds (the idf's N); at least the candidates'.
    Every candidate is scored before the page is cut, so no later match is ever dropped.
    Duplicate identities (one entry seen twice) count once.
    """
    asked = relevance.query_of(query)
    phrase = normal(query)
    if not phrase or not asked.terms:
        return []
    units: dict[tuple[ConversationRef, str, str], dict[str, Entry]] = {}
    for entry in candidates:
        units.setdefault(unit_of(entry, group), {}).setdefault(entry.entry_id, entry)
    grouped = [sorted(held.values(), key=lambda e: e.seq) for held in units.values()]
    parts = [[relevance.bag(e.text, stops=True, stop_length=asked.stop_only) for e in entries] for entries in grouped]
    docs = [sum(own[1:], own[0]) for own in parts]
    wanted = set(asked.terms)
    frequency = relevance.frequencies(docs, wanted | set(asked.stops))
    stats = relevance.Stats(max(documents or 0, len(docs)), sum(d.length for d in docs) / max(1, len(docs)))
    weights = {t: relevance.idf(stats.documents, frequency[t]) for t in wanted}
    # the query's stop words weigh by their idf too, never finding a candidate of their own: their share
    # of the candidates its content terms found stands for their share of the scope (the candidates
    # are a sample of it), so a stop word weighs alike in a thread's search and an agent's
    share = stats.documents / max(1, len(docs))
    weights |= {t: relevance.idf(stats.documents, frequency[t] * share) for t in asked.stops}
    hits = []
    for entries, own, doc in zip(grouped, parts, docs, strict=True):
        hit = _hit(phrase, entries, own, doc, (weights, wanted), stats, key)
        if hit is not None:
            hits.append(hit)
    ordered = sorted(hits, key=lambda hit: hit.key)
    if after is not None:
        ordered = [hit for hit in ordered if hit.key > after]
    return ordered[:limit]


def _hit(
    phrase: str,
    entries: list[Entry],
    own: list[relevance.Bag],
    doc: relevance.Bag,
    weighed: tuple[Mapping[str, float], set[str]],
    stats: relevance.Stats,
    key: Callable[[Match, Entry], Key],
) -> Hit | None:
    """One exchange's hit: a phrase match in any entry, or a content term anywhere (`weighed`: every
    term's weight, and which terms are content terms); None otherwise. Stop words only add weight."""
    weights, content = weighed
    weigh = [sum(weights[t] for t in content if part.counts.get(t)) for part in own]
    head = phrase.split(" ", 1)[0]  # a phrase is in an entry only if its first word is: skip the others cheaply
    normals = [normal(e.text) if head in e.text.lower() else "" for e in entries]
    phrased = [i for i, normal in enumerate(normals) if phrase in normal]
    matching = [i for i, w in enumerate(weigh) if w > 0]
    if not phrased and not matching:
        return None
    best = phrased[0] if phrased else max(matching, key=lambda i: (weigh[i], -i))
    found_terms = {t for t in content if doc.counts.get(t)}
    text = normals[best] or normal(entries[best].text)
    at = text.find(phrase) if phrased else relevance.locate(text, found_terms)
    found = Match(bool(phrased), len(found_terms), at, relevance.score(doc, weights, stats))
    also = tuple(entries[i] for i in sorted(set(matching) | set(phrased)) if i != best)
    return Hit(entries[best], found, key(found, entries[best]), also)


def search_position(position: list[object]) -> tuple[Key, int | None]:
    """A thread search cursor's position: the last hit's key, then the run's count of exchanges (idf's N)."""
    if len(position) not in (4, 5) or not all(_whole(p) for p in position[:3]):
        raise InvalidEvent("cursor", "is not a search cursor")
    documents = position[4] if len(position) == 5 else None
    if documents is not None and not (_whole(documents) and 0 <= int(str(documents)) <= 2**53):
        raise InvalidEvent("cursor", "is not a search cursor")
    key: Key = (int(str(position[0])), int(str(position[1])), int(str(position[2])), str(position[3]))
    return key, None if documents is None else int(str(documents))


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
