"""kill -9 of a FAISS graph store's writer while a background insertion round builds a copy of the
graph and while flushes write and merge the appendable segment's chunks: after the restart every
acknowledged vector is there exactly once and is its own nearest neighbour, and a writer resumes
and finishes the graph."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import numpy as np

from slimvec.connectors import make_store

SPEC = "faiss:HNSW16,efc=200"
DIM, BATCH, N = 96, 256, 40_000

WRITER = r"""
import sys, numpy as np
from slimvec.connectors import make_store
spec, folder, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
X = np.load(sys.argv[4])
s = make_store(spec, folder).open()
for lo in range(start, len(X), int(sys.argv[5])):
    ids = np.arange(lo, min(lo + int(sys.argv[5]), len(X)))
    s.upsert(ids, X[ids])
    s.flush()
    print(ids[-1] + 1, int(s._builder.busy), flush=True)  # acknowledged up to here
"""


def _unit(n: int) -> np.ndarray:
    x = np.random.default_rng(5).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_kill_9_during_background_rounds_and_chunk_writes_loses_no_acknowledged_vector(tmp_path):
    X = _unit(N)
    np.save(tmp_path / "x.npy", X)
    folder = tmp_path / "s"
    make_store(SPEC, folder).create(DIM, "cosine").close()
    acked, rounds_hit = 0, 0
    for trial in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, SPEC, str(folder), str(acked),
                                 str(tmp_path / "x.npy"), str(BATCH)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        wanted = 5 + 7 * trial  # batches acknowledged before the kill, then a round under way
        seen = 0
        for line in proc.stdout:
            upto, busy = map(int, line.split())
            acked, seen = upto, seen + 1
            if seen >= wanted and busy:
                rounds_hit += 1
                break
        time.sleep(random.Random(trial).uniform(0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        store = make_store(SPEC, folder).open()
        try:
            ids = store.ids()
            assert len(ids) == len(set(ids.tolist())) and len(ids) >= acked  # once each, none lost
            assert set(range(acked)) <= set(ids.tolist()) and ids.max() < N
            sample = np.random.default_rng(trial).choice(acked, 300, replace=False)
            assert (store.search(X[sample], 1).ids[:, 0] == sample).all()
            acked = len(ids)  # what the next writer continues from
        finally:
            store.close()  # a reader: the graph file and the chunks stay as the kill left them
    assert rounds_hit >= 3  # the kills did land while a round ran
    store = make_store(SPEC, folder).open()
    store.upsert(np.arange(acked, N), X[acked:])
    store.finalize()
    store.close()
    assert not list(folder.glob("tail*.npy"))
    store = make_store(SPEC, folder).open()
    try:
        assert store.count() == N and store._index.ntotal == N
        assert (store.search(X[:2000], 1).ids[:, 0] == np.arange(2000)).mean() > 0.97
    finally:
        store.close()
