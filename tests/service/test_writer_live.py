"""Issue 24 item 2: the service's writer thread drives a long-lived writer
(IndexBuilder.open_writer: open once, write many, commit, close) instead of entering and exiting an
IndexBuilder by hand. No server: the writer thread over a real hnswlib index in a temp folder."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from slimvec.buildspec import BuildSpec
from slimvec.errors import IndexBusyError
from slimvec.index.manifest import Manifest
from slimvec.indexer.builder import IndexBuilder
from slimvec.indexer.writer import VectorBatch
from slimvec.service.indexes.writer import IndexWriter


def _vectors(n: int) -> np.ndarray:
    X = np.random.default_rng(1).standard_normal((n, 16)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_the_writer_thread_writes_through_a_long_lived_writer_and_releases_it(tmp_path):
    X = _vectors(60)
    folder = tmp_path / "idx"
    live = IndexBuilder.open_writer(folder, BuildSpec(reducer="rp:4", store="hnsw", source="t"),
                                    fit=X)
    writer = IndexWriter(live, threading.RLock())
    assert writer.live is live
    try:
        futs = [writer.submit(VectorBatch(np.arange(lo, lo + 20), X[lo:lo + 20], [{}] * 20, [],
                                          0), 20) for lo in range(0, 60, 20)]
        assert [f.result(60) for f in futs][-1] == 60
        assert writer.mutate(lambda b: int(b.store.count())).result(60) == 60
        with pytest.raises(IndexBusyError):  # the writer holds the index while it serves it
            IndexBuilder.open_writer(folder)
    finally:
        writer.close(60)
    m = Manifest.read(folder)
    assert m.completed and m.count == 60 and m.store_sha256  # finished on close
    IndexBuilder.open_writer(folder).close()  # and released
