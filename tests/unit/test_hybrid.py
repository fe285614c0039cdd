"""Archive search by words and meaning fused (projections/hybrid.py): reciprocal rank fusion of the word
ranking with the nearest exchanges, phrases first, one hit per exchange, nothing without a word found,
pages that neither drop nor repeat."""

from __future__ import annotations

from projections.archives import ConversationRef, Entry, rank_key
from projections.hybrid import NEAREST, fuse
from projections.ranking import rank

REF = ConversationRef("castle", "session", "ann", "main")


def exchange(n: int, question: str, answer: str) -> list[Entry]:
    return [
        Entry(REF, f"q{n}", f"t:0:{2 * n}", 2 * n, f"x{n}", "question", 2 * n, question, None),
        Entry(REF, f"a{n}", f"t:0:{2 * n + 1}", 2 * n + 1, f"x{n}", "answer", 2 * n + 1, answer, None),
    ]


THREAD = [
    exchange(0, "I fed the horses in the stable", "good"),
    exchange(1, "the stable roof leaks", "fix it"),
    exchange(2, "the diamonds are in the blue boot", "noted"),
    exchange(3, "the stable door squeaks", "oil it"),
]


def _fused(query: str, near: list[int], after: object = None, limit: int = 10, floor: float | None = None) -> list[str]:
    candidates = [e for group in THREAD for e in group]
    lexical = rank(query, candidates, after=None, limit=100)
    nearest = [(1.0 - i / 10, THREAD[n]) for i, n in enumerate(near)]
    hits = fuse(lexical, nearest, key=rank_key, limit=limit, floor=floor)
    return [hit.entry.exchange_id or "" for hit in hits]


def test_the_nearest_join_what_the_words_found_and_both_lists_lift_an_exchange() -> None:
    found = _fused("which stable chore hid the gems", near=[2, 3])
    assert set(found) == {"x0", "x1", "x2", "x3"} and len(found) == 4  # one hit per exchange
    assert found[0] == "x3"  # in both lists
    assert found.index("x2") > found.index("x3")


def test_nothing_found_by_words_is_nothing_found() -> None:
    assert _fused("where are my gems", near=[2, 0]) == []  # no content word occurs: the nearest are no answer
    assert _fused("where did I put it", near=[2]) == []


def test_with_no_word_found_the_nearest_answer_alone_only_past_the_floor() -> None:
    # the nearest's cosine is 1.0, the next 0.9: above the floor they answer, nearest first
    assert _fused("where are my gems", near=[2, 0], floor=0.95) == ["x2", "x0"]
    assert _fused("where are my gems", near=[2, 0], floor=1.0) == []  # not past it: nothing found
    assert _fused("where are my gems", near=[], floor=0.0) == []
    shown = fuse([], [(0.9, THREAD[2])], key=rank_key, limit=10, floor=0.5)
    assert shown[0].entry.role == "answer" and shown[0].found.coverage == 0
    assert _fused("stable", near=[2], floor=1.0)[-1] == "x2"  # with words found, the floor plays no part


def test_a_phrase_matched_whole_ranks_first_and_a_vector_only_hit_shows_the_answer() -> None:
    candidates = [e for group in THREAD for e in group]
    lexical = rank("stable roof", candidates, after=None, limit=100)
    hits = fuse(lexical, [(0.9, THREAD[2]), (0.8, THREAD[3])], key=rank_key, limit=10)
    assert hits[0].entry.exchange_id == "x1" and hits[0].found.phrase
    shown = next(hit for hit in hits if hit.entry.exchange_id == "x2")
    assert shown.entry.role == "answer" and shown.found.coverage == 0


def test_only_the_nearest_ten_take_part_and_pages_follow_the_keys() -> None:
    whole = _fused("stable", near=[2] * (NEAREST + 5))  # one exchange named many times counts once
    assert whole.count("x2") == 1
    candidates = [e for group in THREAD for e in group]
    lexical = rank("stable", candidates, after=None, limit=100)
    near = [(0.9, THREAD[2]), (0.5, THREAD[0])]
    everything = fuse(lexical, near, key=rank_key, limit=10)
    first = fuse(lexical, near, key=rank_key, limit=2)
    rest = fuse(lexical, near, key=rank_key, after=first[-1].key, limit=10)
    assert [h.entry.entry_id for h in first + rest] == [h.entry.entry_id for h in everything]
