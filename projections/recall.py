"""Recall: which lasting facts bear on a question (seed 003, "How recall actually works", done better).

Pure rules, no I/O. The candidates are the facts the asking agent may see: the subject's own and the
tenant's knowledge. Each is scored by two signals:

- lexical: the share of the question's words (weighted by how rare they are among the candidates,
  as BM25's idf weighs them) that the fact contains, after the token index's folding: case, accents,
  Snowball stems (projections/words.py), dotted and plural acronyms ("A.I." finds "AI", "PRs" finds "PR");
- semantic: the cosine of the question's and the fact's embeddings, when a model is configured.

The two are fused by a logistic model fitted on the evaluation set (bench/calibrate_recall.py), so a
score is an estimate of the probability that the fact bears on the question: comparable across
questions, with one floor below which nothing is claimed. An exact word still wins over a vague
paraphrase (the lexical weight adds to the cosine), and a paraphrase sharing no word is found by the
cosine alone.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from projections.facts import Fact, SubjectFacts
from projections.words import index_terms

SUBJECT = "subject"  # a fact about the subject
TENANT = "tenant"  # the tenant's knowledge, recalled for every subject


@dataclass(frozen=True)
class Calibration:
    """p = 1 / (1 + exp(-z)), z = the weighted signals plus a bias. The signals: the cosine, the
    lexical score, and each one's distance below the best candidate's (0 for the best): a fact that
    stands out from the others bears on the question more surely than one among equals."""

    cosine: float
    lexical: float
    cosine_gap: float
    lexical_gap: float
    bias: float

    def probability(self, cosine: float, lexical: float, best_cosine: float, best_lexical: float) -> float:
        z = (
            cosine * self.cosine
            + lexical * self.lexical
            + (cosine - best_cosine) * self.cosine_gap
            + (lexical - best_lexical) * self.lexical_gap
            + self.bias
        )
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


# Fitted by bench/calibrate_recall.py on tests/fixtures/recall_eval.json and recall_heldout.json with
# all-MiniLM-L6-v2 (semantic) and with no model (lexical); see the README's "How recall ranks".
SEMANTIC = Calibration(cosine=10.773, lexical=1.299, cosine_gap=16.817, lexical_gap=2.301, bias=-3.909)
LEXICAL = Calibration(cosine=0.0, lexical=10.754, cosine_gap=0.0, lexical_gap=6.792, bias=-3.199)


@dataclass(frozen=True)
class RecallPolicy:
    limit: int = 5  # seed 003: "The best handful go into the prompt"
    floor: float = 0.3  # a fact scored below this probability is not claimed to bear on the question
    semantic: Calibration = SEMANTIC
    lexical: Calibration = LEXICAL


@dataclass(frozen=True)
class Recalled:
    fact: Fact
    score: float  # the estimated probability that it bears on the question; 0 for a "recent" fill-in
    how: str  # keyword (a word matched, no model) | similarity (meaning only) | both | recent
    belongs_to: str = SUBJECT  # subject | tenant

    def key(self) -> tuple[float, int, str, str]:
        """Best first: score, then the newest, then a stable order."""
        return (-self.score, -self.fact.updated_at, self.belongs_to, self.fact.fact_id)


Candidate = tuple[Fact, str]  # a fact and whom it belongs to


def candidates(
    subject: SubjectFacts | None,
    tenant: SubjectFacts | None,
    *,
    agent: str | None,
    now_ms: int,
    shared_only: bool = False,
) -> list[Candidate]:
    """The facts an asker may recall: an agent its own and the shared ones of the subject and the
    tenant; a reader naming no agent with `shared_only`, the shared ones alone."""
    pool: list[Candidate] = []
    for state, origin in ((subject, SUBJECT), (tenant, TENANT)):
        if state is None or not state.alive(now_ms):
            continue
        for fact in state.facts:
            if (shared_only and fact.scope != "shared") or not fact.visible_to(agent):
                continue
            pool.append((fact, origin))
    return pool


@dataclass(frozen=True)
class Rarity:
    """BM25's idf of each word among the candidates; a word none of them has weighs most."""

    weights: Mapping[str, float]
    unseen: float

    @classmethod
    def of(cls, pool: Sequence[Candidate]) -> Rarity:
        frequency: Counter[str] = Counter()
        for fact, _ in pool:
            frequency.update(set(index_terms(fact.text)))
        n = len(pool)
        weights = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}
        return cls(weights, math.log(1 + (n + 0.5) / 0.5))

    def __call__(self, term: str) -> float:
        return self.weights.get(term, self.unseen)


def lexical_score(fact_terms: Iterable[str], query: Sequence[str], rarity: Rarity) -> float:
    """The idf-weighted share of the question's distinct words the fact contains, 0 to 1."""
    distinct = set(query)
    if not distinct:
        return 0.0
    total = sum(rarity(term) for term in distinct)
    have = set(fact_terms)
    return sum(rarity(term) for term in distinct if term in have) / total


def rank(
    pool: Sequence[Candidate],
    question: str,
    policy: RecallPolicy,
    similarity: Mapping[str, float] | None = None,
) -> list[Recalled]:
    """Every candidate at or above the floor, best first. `similarity`: fact id -> cosine, from the
    configured model; a fact missing from it (no vector yet) is scored by its words alone."""
    query = index_terms(question)
    if not query and not similarity:
        return []
    rarity = Rarity.of(pool)
    lexical = [lexical_score(index_terms(fact.text), query, rarity) for fact, _ in pool]
    cosines = [None if similarity is None else similarity.get(fact.fact_id) for fact, _ in pool]
    best_lexical = max(lexical, default=0.0)
    best_cosine = max((value for value in cosines if value is not None), default=0.0)
    ranked = []
    for (fact, origin), words, cosine in zip(pool, lexical, cosines, strict=True):
        if cosine is None:
            score, how = policy.lexical.probability(0.0, words, 0.0, best_lexical), "keyword"
        else:
            # the meaning's estimate, unless the words alone make a surer one: an exact term still wins
            score = max(
                policy.semantic.probability(cosine, words, best_cosine, best_lexical),
                policy.lexical.probability(0.0, words, 0.0, best_lexical),
            )
            how = "both" if words > 0 else "similarity"
        if score >= policy.floor:
            ranked.append(Recalled(fact, score, how, origin))
    ranked.sort(key=Recalled.key)
    return ranked


def recent(pool: Sequence[Candidate], limit: int, exclude: Iterable[str] = ()) -> list[Recalled]:
    """The newest facts, marked as such: a fill-in only a caller asks for (`fill=recent`)."""
    skip = set(exclude)
    newest = sorted(
        (candidate for candidate in pool if candidate[0].fact_id not in skip),
        key=lambda candidate: (-candidate[0].updated_at, candidate[1], candidate[0].fact_id),
    )
    return [Recalled(fact, 0.0, "recent", origin) for fact, origin in newest[:limit]]


PageKey = tuple[float, int, str, str]


def page(
    ranked: Sequence[Recalled], *, limit: int, exclude: Iterable[str] = (), after: PageKey | None = None
) -> tuple[list[Recalled], PageKey | None]:
    """Up to `limit` of the ranked hits, skipping the ids in `exclude` and those at or before `after`
    (the key of a previous page's last hit); and the key to continue from when more remain."""
    skip = set(exclude)
    rest = [hit for hit in ranked if hit.fact.fact_id not in skip and (after is None or hit.key() > after)]
    taken = rest[:limit]
    return taken, (taken[-1].key() if len(rest) > limit else None)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def render(hits: Sequence[Recalled]) -> str:
    """The facts as lines for the prompt; says so when nothing bears on the question."""
    if not hits:
        return "(nothing memlog keeps bears on this question)\n"
    lines = []
    for hit in hits:
        mark = " (recent, not matched to the question)" if hit.how == "recent" else ""
        whose = "[tenant] " if hit.belongs_to == TENANT else ""
        lines.append(f"- {whose}{hit.fact.text}{mark}\n")
    return "".join(lines)
