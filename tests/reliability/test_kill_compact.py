"""kill -9 during ``compact`` (issue 25 "Done when"): a subprocess deletes a batch of documents
(one commit), then compacts the full-vector side file (a new folder written beside the old one,
the manifest switched to it in one atomic write, the old folder removed), over and over, and is
killed at a random moment inside a compaction. The reopened index has an exact count, the deleted
documents never come back from get or a rescored search, every kept document still rescores to
itself (its full vector survived), and the next compaction cleans what the killed one left.
hnswlib and Qdrant Edge (``SLIMVEC_KILL_TRIALS`` trials each, default 2)."""

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
from slimvec.ops.compact import compact_index
from tests.reliability.killtrial import migrated_index

TRIALS = int(os.environ.get("SLIMVEC_KILL_TRIALS", "2"))
N, BATCH = 600, 20

CHILD = r"""
import sys
import slimvec
from slimvec.ops.compact import compact_index
folder, batch = sys.argv[1], int(sys.argv[2])
n = 0
while True:
    with slimvec.open(folder) as idx:
        idx.delete([f"doc-{i}" for i in range(n * batch, (n + 1) * batch)])
    print("deleted", n, flush=True)
    print("compact", n, flush=True)
    compact_index(folder, None)
    print("compacted", n, flush=True)
    n += 1
"""


@pytest.fixture(scope="module", params=["pca:16|hnsw|rescore=4",
                                        "pca:16|qdrant-edge|rescore=4,keep_full=float16"])
def built(request, minilm_vectors, tmp_path_factory):
    folder, vecs, sids = migrated_index(minilm_vectors, tmp_path_factory, request.param, N)
    with slimvec.open(folder) as idx:
        assert idx.manifest.full is not None and idx.manifest.full.dir  # the side file compacts
    return folder, vecs, sids


def _kill_inside_a_compaction(folder, rng) -> int:
    """Run the child until a random compaction has started, kill it there; returns the number
    of confirmed delete batches."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(folder), str(BATCH)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    deleted, target = 0, rng.randint(1, 4)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        kind, n = line.split()
        if kind == "deleted":
            deleted = int(n) + 1
        elif kind == "compact" and int(n) + 1 >= target:
            time.sleep(rng.uniform(0.0, 0.03))  # somewhere inside that compaction
            break
    proc.kill()
    proc.wait(timeout=30)
    assert deleted >= 1, proc.stderr.read()[-2000:]
    return deleted


def test_sigkill_during_compact_loses_nothing_and_brings_nothing_back(built, tmp_path):
    base, vecs, sids = built
    for trial in range(TRIALS):
        rng = random.Random(500 + trial)
        folder = tmp_path / f"t{trial}"
        shutil.copytree(base, folder)
        removed = _kill_inside_a_compaction(folder, rng) * BATCH  # doc-0 .. doc-{removed-1}
        with slimvec.open(folder) as idx:
            assert idx.count() == N - removed
            recs = idx.get([f"doc-{i}" for i in range(N)])
            assert all(r is None for r in recs[:removed]) and all(r is not None for r in recs[removed:])
            found = idx.search(vecs[:removed + 40:3], 10).ids  # rescored (the recipe's depth)
            assert not np.isin(found, sids[:removed]).any()
            kept = np.arange(removed, N, 17)
            top = idx.search(vecs[kept], 1).ids[:, 0]  # each kept document rescores to itself
            assert (top == sids[kept]).all(), (top, sids[kept])
        out = compact_index(folder, None)  # the next compaction finishes and cleans up
        assert out["compacted"] is True
        with slimvec.open(folder) as idx:
            assert idx.count() == N - removed and idx.full_vectors.dead_rows() == 0
            leftovers = [p.name for p in folder.iterdir()
                         if p.is_dir() and p.name not in ("store", "reducer", idx.manifest.full.dir)]
            assert not [n for n in leftovers if n.startswith("full")], leftovers
