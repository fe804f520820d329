"""Concurrent searches against every store, and searching while another process ingests."""
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.errors import IndexBusyError
from slimvec.index.folder import open_index

THREADS, SEARCHES = 8, 2000


@pytest.mark.parametrize("spec", ["qdrant-edge", "faiss", "hnsw", "qdrant"])
def test_eight_threads_of_searches_complete_without_errors(tmp_path, minilm_vectors, spec):
    vecs = np.ascontiguousarray(minilm_vectors[:500, :16], dtype=np.float32)
    store = make_store(spec, tmp_path / "store").create(16, "cosine")
    store.upsert(np.arange(len(vecs)), vecs, [{"n": i} for i in range(len(vecs))])
    store.flush()
    searches = SEARCHES if spec != "qdrant" else SEARCHES // 4  # local qdrant-client is pure Python

    def worker(seed: int) -> int:
        rng = np.random.default_rng(seed)
        wrong = 0
        for _ in range(searches):
            i = int(rng.integers(len(vecs)))
            res = store.search(vecs[i:i + 1], k=3)
            wrong += int(res.ids[0, 0]) != i
        return wrong

    with ThreadPoolExecutor(THREADS) as pool:
        wrong = list(pool.map(worker, range(THREADS)))
    store.close()
    assert sum(wrong) <= THREADS * searches * 0.01  # the nearest of a stored vector is itself


def test_a_search_during_another_process_ingest_succeeds_or_says_busy(tmp_path, sentences):
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(s.replace("\n", " ") for s in sentences[:2000]) + "\n",
                      encoding="utf-8")
    index = tmp_path / "idx"
    cmd = [sys.executable, "-m", "slimvec", "ingest", str(corpus), "--index", str(index),
           "--reducer", "pca:16", "--store", "hnsw", "--fit-sample", "300", "--batch-size", "32",
           "--checkpoint-batches", "1", "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1"))
    outcomes = {"busy": 0, "ok": 0}
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if index.exists():
            try:
                with open_index(index) as idx:
                    idx.search(np.ones((1, 384), dtype=np.float32), k=1)
                outcomes["ok"] += 1
            except IndexBusyError as err:
                assert "being written" in str(err)
                outcomes["busy"] += 1
        time.sleep(0.1)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert outcomes["busy"] > 0  # the writer held the index while we tried
    with open_index(index) as idx:
        assert idx.store.count() == 2000
