"""Issue 24 item 2: one write sequence. A fourth producer is only its own part (here a numpy
array, ~30 lines): IndexBuilder.build plans, fits, resumes and skips for it. And the long-lived
writer API (open once, write many, commit, close) the service uses."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from slimvec.buildspec import BuildSpec
from slimvec.errors import ConfigError, IndexBusyError
from slimvec.index.manifest import Manifest
from slimvec.indexer.builder import IndexBuilder
from slimvec.indexer.produce import Producer
from slimvec.indexer.writer import VectorBatch


class ArrayProducer(Producer):
    """Rows of a float32 array into an index; ids are row numbers."""

    unit = "vector"

    def __init__(self, X: np.ndarray, batch: int = 20, die_after: int | None = None) -> None:
        self.X, self.batch, self.die_after, self.starts = X, batch, die_after, []
        self.label = "array:" + hashlib.sha256(X.tobytes()).hexdigest()[:12]

    def build_spec(self, b):
        return BuildSpec(reducer="pca:4", store="hnsw", encoder=None, text_column=None,
                         source=self.label)

    def plan_key(self):
        return self.label, {"size": self.X.nbytes, "head_sha256": self.label}, {}

    def dim_in(self, b):
        return int(self.X.shape[1])

    def fit(self):
        return self.X[:100]

    def batches(self, b, start_row):
        self.starts.append(start_row)
        for k, lo in enumerate(range(start_row, len(self.X), self.batch)):
            if self.die_after is not None and k == self.die_after:
                raise KeyboardInterrupt("killed")  # a crash after some commits
            hi = min(lo + self.batch, len(self.X))
            yield VectorBatch(np.arange(lo, hi), self.X[lo:hi], [{"row": i} for i in range(lo, hi)],
                              [], hi)


def _build(folder, producer):
    with IndexBuilder(folder, checkpoint_batches=1) as b:
        return b.build(producer)


def test_an_array_producer_ingests_resumes_and_is_already_done(tmp_path, minilm_vectors):
    X = np.ascontiguousarray(minilm_vectors[:150, :32])
    folder = tmp_path / "idx"
    first = ArrayProducer(X, die_after=3)
    with pytest.raises(KeyboardInterrupt):
        _build(folder, first)
    m = Manifest.read(folder)
    assert m.progress.state == "running" and m.progress.next_row == 60 and m.count == 60

    second = ArrayProducer(X)
    s = _build(folder, second)
    assert second.starts == [60] and s.resumed_from == 60 and not s.created
    assert (s.count, s.rows_read, s.ingested, s.unaccounted) == (150, 90, 90, 0)
    assert Manifest.read(folder).progress.state == "done"

    third = ArrayProducer(X)
    s = _build(folder, third)
    assert s.already_done and s.count == 150 and third.starts == []

    changed = ArrayProducer(X[::-1].copy())  # another input adds to the index: a fresh plan
    s = _build(folder, changed)
    assert changed.starts == [0] and s.count == 150


def test_the_long_lived_writer_opens_once_writes_many_and_closes(tmp_path, minilm_vectors):
    X = np.ascontiguousarray(minilm_vectors[:120, :32])
    folder = tmp_path / "idx"
    spec = BuildSpec(reducer="pca:4", store="hnsw", encoder=None, text_column=None, source="t")
    with IndexBuilder.open_writer(folder, spec, fit=X[:100]) as w:
        assert Manifest.read(folder).count == 0  # a new index is committed at once
        for lo in range(0, 60, 20):
            w.write(VectorBatch(np.arange(lo, lo + 20), X[lo:lo + 20], [{}] * 20, [], lo + 20))
            w.commit()
        assert w.mutate(lambda b: b.store.count()) == 60
        with pytest.raises(IndexBusyError):  # the writer lock is held while it is open
            IndexBuilder.open_writer(folder)
    m = Manifest.read(folder)
    assert m.completed and m.count == 60 and m.store_sha256  # finished: checksums recorded

    w = IndexBuilder.open_writer(folder)  # reopened as built
    w.write(VectorBatch(np.arange(60, 120), X[60:120], [{}] * 60, [], 120))
    w.commit()
    w.finish()
    w.close()
    assert Manifest.read(folder).count == 120
    IndexBuilder.open_writer(folder).close()  # released: it opens again


def test_a_writer_on_a_folder_without_an_index_is_refused_and_releases_it(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    for _ in range(2):  # the second is refused for the same reason, not "busy"
        with pytest.raises(ConfigError, match="holds no index"):
            IndexBuilder.open_writer(folder)
    assert set(os.listdir(folder)) <= {".lock"}  # nothing but the lock file was made
