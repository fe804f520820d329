"""kill -9 during deletes (issue 25 item 1): a subprocess deletes batches of documents through
Index.delete, one commit each, and is killed at a random moment; the reopened index has an exact
count, every confirmed deleted document stays gone from get and every search, the batch in flight
is gone whole or kept whole, and nothing else is lost. hnswlib and Qdrant Edge (``SLIMVEC_KILL_TRIALS``
trials each, default 2)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import slimvec
from tests.reliability.killtrial import migrated_index

TRIALS = int(os.environ.get("SLIMVEC_KILL_TRIALS", "2"))
N, BATCH = 600, 20

CHILD = r"""
import sys
import slimvec
folder, batch = sys.argv[1], int(sys.argv[2])
n = 0
while True:
    ids = [f"doc-{i}" for i in range(n * batch, (n + 1) * batch)]
    with slimvec.open(folder) as idx:
        print("start", n, flush=True)
        idx.delete(ids)
    print("done", n, flush=True)
    n += 1
"""


@pytest.fixture(scope="module", params=["pca:16|hnsw|rescore=4", "pca:16|qdrant-edge|rescore=4,keep_full=float16"])
def built(request, minilm_vectors, tmp_path_factory):
    folder, vecs, sids = migrated_index(minilm_vectors, tmp_path_factory, request.param, N)
    return folder, vecs, sids


def test_sigkill_during_delete_loses_nothing_and_brings_nothing_back(built, tmp_path):
    base, vecs, sids = built
    for trial in range(TRIALS):
        rng = random.Random(300 + trial)
        folder = tmp_path / f"t{trial}"
        shutil.copytree(base, folder)
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(folder), str(BATCH)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, OMP_NUM_THREADS="1"))
        done, started = -1, -1
        target = rng.randint(1, 4)  # kill during a delete after this many batches were confirmed
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            kind, n = line.split()
            if kind == "done":
                done = int(n)
            else:
                started = int(n)
                if done + 1 >= target:
                    time.sleep(rng.uniform(0.0, 0.05))  # somewhere inside that delete
                    break
        proc.kill()
        proc.wait(timeout=30)
        for line in proc.stdout.read().splitlines():  # what it confirmed while we slept
            kind, n = line.split()
            done, started = (int(n), started) if kind == "done" else (done, int(n))
        assert done >= 0, proc.stderr.read()[-2000:]
        gone = (done + 1) * BATCH  # confirmed deleted: doc-0 .. doc-{gone-1}
        with slimvec.open(folder) as idx:
            count = idx.count()
            in_flight = count == N - gone - BATCH  # the killed batch completed before the kill
            assert count == N - gone or (in_flight and started == done + 1), (count, done, started)
            removed = gone + (BATCH if in_flight else 0)
            assert idx.manifest.count in (count, count + BATCH)  # a kill before its write lags a batch
            recs = idx.get([f"doc-{i}" for i in range(N)])
            assert all(r is None for r in recs[:removed]) and all(r is not None for r in recs[removed:])
            for rescore in (None, 0):
                found = idx.search(vecs[:removed + 40:7], 10, rescore=rescore).ids
                assert not np.isin(found, sids[:removed]).any()
            found = idx.search(vecs[:removed:5], 10, filter={"must": [{"key": "g", "match": {"value": 1}}]}).ids
            assert not np.isin(found, sids[:removed]).any()
            # and the writer can continue: the next delete works and the count follows
            assert idx.delete([f"doc-{N - 1}"]) == 1 and idx.count() == count - 1
