"""Fixtures for the pruning tests: a fresh, private copy of the packaged MiniLM per test."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "slimvec" / "data"

TEXTS = [
    "A man is playing a guitar on the street.",
    "The cat sat quietly on the mat near the window.",
    "Stock markets fell sharply after the announcement.",
    "Two children are riding bicycles in the park.",
    "A woman is slicing tomatoes in the kitchen.",
]


@pytest.fixture(scope="session")
def texts() -> list[str]:
    return list(TEXTS)


@pytest.fixture(scope="session")
def _minilm_cpu():
    from slimvec.encoder import Encoder

    return Encoder(device="cpu").model


@pytest.fixture
def minilm(_minilm_cpu):
    """A deep copy of MiniLM that a test may prune, mask or train freely."""
    model = copy.deepcopy(_minilm_cpu)
    model.eval()
    return model


@pytest.fixture(scope="session")
def corpus_sentences() -> list[str]:
    """Real sentences from the bundled STS-B train pairs (both columns)."""
    from slimvec.pruning.corpus import read_corpus

    return read_corpus(DATA / "stsb-train.tsv", limit=400)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """One intra-op thread: on a shared 2-core machine, OpenMP threads spinning against other
    processes make training steps 5-10x slower and their time erratic."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
