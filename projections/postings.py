"""Postings for bounded search across threads (issue 41): pure rules, no I/O.

A common word, or a stop word, is held by nearly every exchange of an agent, so finding its candidates
in the archive's groups reads them all: 22 KB and a thousand terms each, 8 s for 1,200 exchanges on
SecantusDB. A posting is a small document per term of an archived entry, with the term's impact there:
its BM25 term-frequency part (projections/relevance.py's K1 and B) against a fixed mean length, so the
postings of a term can be read best first. A search reads a term's postings, and when more than
`per_term` exchanges hold it, fetches only the `per_term` of highest impact and marks the result
partial; a term held by fewer is found in the groups as before, exactly.

An entry posts at most MAX_POSTINGS terms (its most frequent ones): a tool call of 28,000 distinct words
must still archive in seconds. A term it does not post is still found through the groups' index, as
every term of an archive written before postings is (they are written from this version on; a replay
writes them for the whole log).
"""

from __future__ import annotations

from projections import relevance

MAX_POSTINGS = 1000  # terms an entry posts at most: its most frequent
MEAN_LENGTH = 300.0  # the length an impact is normalised against (a search's ranking uses the true mean)
IMPACT_SCALE = 1000
Within = tuple[str | None, int]  # a thread search's conversation (None: every one) and snapshot
PER_TERM = 20  # exchanges a common term's candidates are cut to, at least (a page and one more when larger)


def impacts(text: str) -> dict[str, int]:
    """A text's terms, stop words included (a query of stop words alone reads postings too), with their
    impact: at most MAX_POSTINGS, the most frequent first."""
    bag = relevance.bag(text, stops=True)
    if not bag.length:
        return {}
    norm = relevance.K1 * (1.0 - relevance.B + relevance.B * bag.length / MEAN_LENGTH)
    kept = sorted(bag.counts.items(), key=lambda item: (-item[1], item[0]))[:MAX_POSTINGS]
    return {term: round(IMPACT_SCALE * n * (relevance.K1 + 1.0) / (n + norm)) for term, n in kept}


def per_term(limit: int) -> int:
    """How many exchanges a common term contributes to a page of `limit` results."""
    return max(PER_TERM, limit + 1)
