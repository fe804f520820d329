"""kill -9 during a real ``slimvec migrate`` subprocess, then resume with the same command.

One trial per store (``SLIMVEC_KILL_TRIALS`` for more): 0 vectors lost, 0 duplicated, and every
sampled vector finds itself (its payload names its source id).
"""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from slimvec.ids import doc_ids
from slimvec.index.folder import open_index

TRIALS = int(os.environ.get("SLIMVEC_KILL_TRIALS", "1"))
N = 3000


@pytest.fixture(scope="module")
def source(tmp_path_factory, minilm_vectors):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path_factory.mktemp("src") / "vectors.parquet"
    ids = [f"doc-{i}" for i in range(N)]
    table = pa.table({"id": ids, "vector": [v.tolist() for v in minilm_vectors[:N]],
                      "name": ids})
    pq.write_table(table, path)
    return path, ids


def _cmd(path, index, store):
    return [sys.executable, "-m", "slimvec", "migrate", "--from",
            f"parquet:{path},id=id,vector=vector", "--index", str(index), "--reducer", "pca:16",
            "--store", store, "--fit-sample", "300", "--batch-size", "32",
            "--checkpoint-batches", "1", "--json"]


@pytest.mark.parametrize("store", ["qdrant-edge", "faiss", "hnsw"])
def test_sigkilled_migrate_resumes_without_loss_or_duplicates(tmp_path, source, minilm_vectors,
                                                              store):
    path, ids = source
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for trial in range(TRIALS):
        rng = random.Random(2000 + trial)
        index = tmp_path / f"idx{trial}"
        cmd = _cmd(path, index, store)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 120
        while (not (index / "manifest.json").exists() and proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 1.0))
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        resumed = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        summary = json.loads(resumed.stdout)
        if killed:  # the rerun resumed after the last commit (or, killed before it, started anew)
            assert summary["resumed_from"] is not None or summary["created"], summary
            assert summary["unaccounted"] == 0, summary
        with open_index(index) as idx:
            assert idx.store.count() == N  # nothing duplicated, nothing lost ...
            payloads = idx.payloads(doc_ids(ids).tolist())
            assert sum(p is None for p in payloads) == 0  # ... by id
            picks = rng.sample(range(N), 30)
            res = idx.search(minilm_vectors[picks], k=1)
            found = [(idx.payloads([int(i)])[0] or {}).get("name") for i in res.ids[:, 0]]
            assert sum(f == ids[p] for f, p in zip(found, picks)) >= 27, (found, picks)
