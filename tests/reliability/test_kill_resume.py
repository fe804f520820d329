"""kill -9 during a real ``slimvec ingest`` subprocess, then resume with the same command.

CI runs one trial per store (each ~15 s: two subprocesses load MiniLM); the README's ten-per-store
table is ``SLIMVEC_KILL_TRIALS=10 python -m pytest -s tests/reliability/test_kill_resume.py``, which
prints one JSON line per trial and a summary per store.
"""
import json
import os

import pytest

from tests.reliability.killtrial import make_corpus, run_trial

TRIALS = int(os.environ.get("SLIMVEC_KILL_TRIALS", "1"))


# the last: a FAISS graph built over float16 codes mid-load (issue 36; trained after 200 vectors)
@pytest.mark.parametrize("store", ["qdrant-edge", "faiss", "hnsw", "faiss:HNSW16,SQ4,train_size=200"])
def test_sigkilled_ingest_resumes_without_loss_or_duplicates(tmp_path, store):
    corpus = tmp_path / "corpus.jsonl"
    rows = make_corpus(corpus)
    results = []
    for trial in range(TRIALS):
        out = run_trial(corpus, rows, tmp_path / f"idx{trial}", store, seed=1000 + trial)
        print(json.dumps(out))
        results.append(out)
        assert out["count"] == len(rows), out
        assert (out["lost"], out["duplicates"], out["unsearchable"]) == (0, 0, 0), out
    print(json.dumps({"store": store, "trials": len(results), "docs": len(rows),
                      "killed_mid_run": sum(bool(r["killed"]) for r in results),
                      **{k: sum(r[k] for r in results) for k in ("lost", "duplicates", "unsearchable")}}))
