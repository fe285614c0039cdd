"""Recall: which lasting facts bear on a question (seed 003, "How recall actually works", done better).

Pure rules, no I/O. The candidates are the facts the asking agent may see: the subject's own and the
tenant's knowledge. Each is scored by two signals:

- lexical: the share of the question's words (weighted by how rare they are among the candidates,
  as BM25's idf weighs them) that the fact contains, after the token index's folding: case, accents,
  plurals, dotted and plural acronyms ("A.I." finds "AI", "PRs" finds "PR");
- semantic: the cosine of the question's and the fact's embeddings, when a model is configured.

The two are fused by a logistic model fitted on part of the evaluation sets (bench/calibrate_recall.py),
so a score is an estimate of the probability that the fact bears on the question: comparable across
questions, with one floor at and above which a fact is labelled as bearing on it. The floor labels;
it does not withhold: the agent is given the best `limit` facts it may see (`offer`), those that bear
first, unless the policy is strict. An exact word still wins over a vague
paraphrase (the lexical weight adds to the cosine), and a paraphrase sharing no word is found by the
cosine alone.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from projections.facts import Fact, SubjectFacts
from projections.words import STOP_WORDS, fold, index_terms, words

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


# Fitted by bench/calibrate_recall.py on the tenants of FIT_TENANTS (tests/evaluation/recall_scoring.py:
# recall_eval.json and one tenant of recall_heldout.json) with all-MiniLM-L6-v2 (semantic) and with no model (lexical);
# reported on the other tenants only (docs/backend/facts.md, "How recall ranks").
SEMANTIC = Calibration(cosine=11.793, lexical=0.038, cosine_gap=19.836, lexical_gap=2.195, bias=-3.573)
LEXICAL = Calibration(cosine=0.0, lexical=9.849, cosine_gap=0.0, lexical_gap=7.174, bias=-2.985)


@dataclass(frozen=True)
class RecallPolicy:
    limit: int = 5  # seed 003: "The best handful go into the prompt"
    floor: float = 0.5  # a fact scored at or above this probability is labelled as bearing on the question
    near: float = 0.05  # below this a score says nothing: such facts come newest first, as "recent"
    vague: float = 0.15  # when no fact scores this much, the question matched nothing: the newest facts
    strict: bool = False  # only facts that bear on the question (MEMLOG_RECALL_STRICT); none when none does
    semantic: Calibration = SEMANTIC
    lexical: Calibration = LEXICAL


# A recalled fact's place: bearing on the question, then the others by score, then the newest others.
BEARS, NEAR, NEWEST = 0, 1, 2


@dataclass(frozen=True)
class Recalled:
    fact: Fact
    score: float  # the estimated probability that it bears on the question; 0 for a "recent" fill-in
    how: str  # keyword (a word matched, no model) | similarity (meaning only) | both | recent
    belongs_to: str = SUBJECT  # subject | tenant
    bears: bool = False  # its score is at or above the floor
    leads: bool = False  # the best fact for one clause of a compound question

    @property
    def tier(self) -> int:
        return BEARS if self.bears or self.leads else NEWEST if self.how == "recent" else NEAR

    def key(self) -> PageKey:
        """Best first: bearing (a clause's best first), then scored, then recent; by score, then the
        newest, then a stable order."""
        return (
            self.tier,
            0 if self.leads else 1,
            -self.score,
            -self.fact.updated_at,
            self.belongs_to,
            self.fact.fact_id,
        )


PageKey = tuple[int, int, float, int, str, str]


Candidate = tuple[Fact, str]  # a fact and whom it belongs to


# Words that say a question asks for what was said, not for something in it: "what did I tell you before?",
# "what do you know about me?", "remind me what I said". A question made of the words of one language's
# list alone (English's with the stop words) is vague: it gets the newest facts, labelled not matched,
# whatever any fact's words or vector (a fact that happens to say "before" does not answer it). One list
# per language, so that "what is AI?" is not taken for French ("j'ai").
_VAGUE_BY_LANGUAGE = {
    "en": """before earlier previously ago already yet far last time times lately recently once ever now
        say says said saying tell tells told telling talk talked talking mention mentioned mentions shared
        know knew known remember remembered recall recalled remind reminding
        anything everything something stuff thing things all else much more
        memory memories fact facts info information details about regarding concerning
        myself us ourselves him her been being had having just also then
        summary summarize summarise recap repeat""",
    "fr": """que qu quoi qui est ce ceci cela ça je j tu t te toi moi me m vous nous ai as a avez avons avais
        avait dit dis dire raconté racontée mentionné appris avant déjà tôt plus sais sait savez savoir
        connais de du des sur à propos rappelle rappelez rappeler souviens souvenez quelle quelles quel
        quels chose choses tout tous rien il y""",
    "de": """was habe hab hast hat ich dir ihnen du sie mich mir uns vorher früher zuvor gesagt erzählt
        erwähnt weißt wisst wissen über erinnere erinnerst erinnern an schon alles etwas""",
    "es": """qué que te le les dije dijiste he has dicho contado mencionado antes sabes sabe saber sobre de
        mí mi me recuérdame recuerdas recuerda lo ya todo algo""",
    "ru": """что я ты тебе вам вы мне меня обо о мной говорил говорила сказал сказала рассказывал
        рассказывала раньше до этого прежде знаешь знаете помнишь помните напомни напомните ли уже всё
        про""",  # noqa: RUF001 (Cyrillic words)
}
VAGUE_WORDS = {
    language: frozenset(fold(word) for word in listed.split()) | (STOP_WORDS if language == "en" else frozenset())
    for language, listed in _VAGUE_BY_LANGUAGE.items()
}


def vague(question: str) -> bool:
    """The question asks for what was said, not about anything: its words are all in one language's
    vague words ("what did I tell you before?"). A question with no word at all is not asked (not vague)."""
    found = set(words(question))
    return bool(found) and any(found <= listed for listed in VAGUE_WORDS.values())


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


def score(
    pool: Sequence[Candidate],
    question: str,
    policy: RecallPolicy,
    similarity: Mapping[str, float] | None = None,
) -> list[Recalled]:
    """Every candidate scored, best first, each labelled `bears` at or above the floor. `similarity`:
    fact id -> cosine, from the configured model; a fact missing from it (no vector yet) is scored by
    its words alone. A question with no words and no vector scores nothing: an empty list."""
    query = index_terms(question)
    if not query and not similarity:
        return []
    rarity = Rarity.of(pool)
    lexical = [lexical_score(index_terms(fact.text), query, rarity) for fact, _ in pool]
    cosines = [None if similarity is None else similarity.get(fact.fact_id) for fact, _ in pool]
    best_lexical = max(lexical, default=0.0)
    best_cosine = max((value for value in cosines if value is not None), default=0.0)
    scored = []
    for (fact, origin), matched, cosine in zip(pool, lexical, cosines, strict=True):
        if cosine is None:
            value, how = policy.lexical.probability(0.0, matched, 0.0, best_lexical), "keyword"
        else:
            # the meaning's estimate, unless the words alone make a surer one: an exact term still wins
            value = max(
                policy.semantic.probability(cosine, matched, best_cosine, best_lexical),
                policy.lexical.probability(0.0, matched, 0.0, best_lexical),
            )
            how = "both" if matched > 0 else "similarity"
        scored.append(Recalled(fact, value, how, origin, value >= policy.floor))
    scored.sort(key=Recalled.key)
    return scored


Part = tuple[str, Mapping[str, float] | None]  # a question or one of its clauses, and its cosines


def combined(pool: Sequence[Candidate], parts: Sequence[Part], policy: RecallPolicy) -> list[Recalled]:
    """The candidates scored against a question and its clauses (`parts`, the whole question first):
    each fact keeps its best score over the parts, and each clause's best fact stands among the first,
    so a compound question ("when does the guild meet and what do I owe?") is answered in every part.
    A vague question scores nothing: [] (`offer` then gives the newest facts, not matched)."""
    if not parts or vague(parts[0][0]):
        return []
    rankings = [score(pool, text, policy, similarity) for text, similarity in parts]
    best: dict[str, Recalled] = {}
    for ranking in rankings:
        for hit in ranking:
            held = best.get(hit.fact.fact_id)
            if held is None or hit.score > held.score:
                best[hit.fact.fact_id] = hit
    if len(rankings) > 2:  # the whole question and two clauses or more: each clause's best leads
        for ranking in rankings[1:]:
            if ranking:
                best[ranking[0].fact.fact_id] = replace(best[ranking[0].fact.fact_id], leads=True)
    return sorted(best.values(), key=Recalled.key)


def rank(
    pool: Sequence[Candidate],
    question: str,
    policy: RecallPolicy,
    similarity: Mapping[str, float] | None = None,
) -> list[Recalled]:
    """Only the candidates that bear on the question, best first (the strict recall)."""
    return [hit for hit in score(pool, question, policy, similarity) if hit.bears]


def offer(pool: Sequence[Candidate], scored: Sequence[Recalled], policy: RecallPolicy) -> list[Recalled]:
    """What the agent is given, in order: the facts that bear on the question; then the others the
    model scores at or above `near`; then every other candidate, newest first, marked "recent" (all of
    them so when none scores `vague` or more: a vague question, "what did I tell you before?"). Each
    candidate once: nothing the asker may see is left out (seed 003: never nothing when facts exist)."""
    if max((hit.score for hit in scored), default=0.0) < policy.vague:
        return recent(pool, len(pool))
    kept = [hit for hit in scored if hit.tier == BEARS or hit.score >= policy.near]
    return kept + recent(pool, len(pool), (hit.fact.fact_id for hit in kept))


CLAUSE = re.compile(r"\?|;|,?\s+(?:and also|and then|and|also|plus)\s+", re.IGNORECASE)
MAX_CLAUSES = 3


def clauses(question: str) -> list[str]:
    """The parts of a compound question, each with a word that is not a stop word; [] for a question
    of one part. "When does the guild meet and what do I owe?" -> ["When does the guild meet",
    "what do I owe"]."""
    found = [part.strip() for part in CLAUSE.split(question)]
    found = [part for part in found if any(word not in STOP_WORDS for word in words(part))]
    return found[:MAX_CLAUSES] if len(found) > 1 else []


def texts_to_score(question: str) -> list[str]:
    """What a question is scored by: itself and its clauses; nothing for a vague question (its newest
    facts are given, and nothing is encoded)."""
    return [] if vague(question) else [question, *clauses(question)]


def recent(pool: Sequence[Candidate], limit: int, exclude: Iterable[str] = ()) -> list[Recalled]:
    """The newest facts, marked as such ("recent"), skipping those in `exclude`."""
    skip = set(exclude)
    newest = sorted(
        (candidate for candidate in pool if candidate[0].fact_id not in skip),
        key=lambda candidate: (-candidate[0].updated_at, candidate[1], candidate[0].fact_id),
    )
    return [Recalled(fact, 0.0, "recent", origin) for fact, origin in newest[:limit]]


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


def render(hits: Sequence[Recalled], subject: str | None = None) -> str:
    """The facts as lines for the prompt: those that bear on the question, then, plainly apart, the
    other facts held, not matched to it."""
    if not hits:
        return "(nothing memlog keeps bears on this question)\n"
    bearing = [hit for hit in hits if hit.bears]
    others = [hit for hit in hits if not hit.bears]
    lines = [_line(hit) for hit in bearing] or ["(nothing memlog keeps bears on this question)\n"]
    if others:
        whom = "the tenant" if subject is None else subject
        lines.append(f"Other facts you hold about {whom}, not matched to the question:\n")
        lines += [_line(hit) for hit in others]
    return "".join(lines)


def _line(hit: Recalled) -> str:
    whose = "[tenant] " if hit.belongs_to == TENANT else ""
    return f"- {whose}{hit.fact.text}\n"
