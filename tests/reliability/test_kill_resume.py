"""kill -9 during a real ``slimvec ingest`` subprocess, then resume with the same command.

CI runs one trial per store (each ~15 s: two subprocesses load MiniLM); the full ten-per-store
count runs with ``python scripts/kill_trials.py`` or ``SLIMVEC_KILL_TRIALS=10``.
"""
import os

import pytest

from tests.reliability.killtrial import make_corpus, run_trial

TRIALS = int(os.environ.get("SLIMVEC_KILL_TRIALS", "1"))


@pytest.mark.parametrize("store", ["qdrant-edge", "faiss", "hnsw"])
def test_sigkilled_ingest_resumes_without_loss_or_duplicates(tmp_path, store):
    corpus = tmp_path / "corpus.jsonl"
    rows = make_corpus(corpus)
    for trial in range(TRIALS):
        out = run_trial(corpus, rows, tmp_path / f"idx{trial}", store, seed=1000 + trial)
        assert out["count"] == len(rows), out
        assert (out["lost"], out["duplicates"], out["unsearchable"]) == (0, 0, 0), out
