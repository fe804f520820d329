"""A FAISS store adopts a finished store written by another writer as a sealed segment
(``FaissStore.adopt``): its graph file moves in whole, searches fan out over the graphs and
merge, filters, deletes and replacements reach every graph, a reopen finds the same, and a kill -9
between the ids and the graph file leaves the store as it was, so the adoption can be done again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.errors import StoreError
from slimvec.filters import parse_filter

DIM = 24


def _unit(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _store(folder, spec, ids, vecs, tag):
    store = make_store(spec, folder)
    store.create(DIM, "cosine")
    store.upsert(ids, vecs, [{"part": tag, "n": int(i)} for i in ids])
    store.finalize()
    store.close()
    return folder


def _exact(vecs: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    return ids[np.argsort(-(q @ vecs.T), axis=1, kind="stable")[:, :k]]


@pytest.fixture
def three(tmp_path):
    """A store of ids 0..599 and two segments (600..999, 1000..1499), as (spec, folders, ids, vecs)."""
    def make(spec):
        ids = [np.arange(0, 600), np.arange(600, 1000), np.arange(1000, 1500)]
        vecs = [_unit(len(i), seed) for seed, i in enumerate(ids)]
        folders = [_store(tmp_path / f"{spec.split(':')[1].split(',')[0]}-{j}", spec, i, v, j)
                   for j, (i, v) in enumerate(zip(ids, vecs))]
        return folders, np.concatenate(ids), np.concatenate(vecs)
    return make


@pytest.mark.parametrize("spec", ["faiss:Flat", "faiss:HNSW16,efc=80"])
def test_adopted_segments_are_searched_with_the_store_and_after_a_reopen(three, spec):
    folders, ids, vecs = three(spec)
    store = make_store(spec, folders[0]).open()
    assert store.adopt(folders[1]) == 400 and store.adopt(folders[2]) == 500
    assert not (folders[1] / "index.faiss").exists()  # moved, not copied
    q = _unit(50, 9)
    truth = _exact(vecs, ids, q, 10)
    got = store.search(q, 10).ids
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, truth)])
    assert store.count() == 1500 and recall >= (1.0 if spec.endswith("Flat") else 0.95)
    assert sorted(set(np.searchsorted([600, 1000], got.ravel(), side="right").tolist())) == [0, 1, 2]
    store.close()
    reader = make_store(spec, folders[0]).open()
    try:
        assert reader.count() == 1500 and np.array_equal(reader.search(q, 10).ids, got)
        assert reader.get_payloads([5, 700, 1200]) == [{"part": 0, "n": 5}, {"part": 1, "n": 700},
                                                       {"part": 2, "n": 1200}]
    finally:
        reader.close()


def test_filters_deletes_and_replacements_reach_every_graph(three):
    spec = "faiss:HNSW16,efc=80"
    folders, ids, vecs = three(spec)
    store = make_store(spec, folders[0]).open()
    store.adopt(folders[1])
    store.adopt(folders[2])
    q = vecs[[10, 650, 1100]]
    only = store.search(q, 5, filter=parse_filter({"must": [{"key": "part", "match": {"value": 2}}]}))
    assert ((only.ids >= 1000) & (only.ids < 1500)).all() and only.ids[2, 0] == 1100
    allowed = store.search(q, 3, filter=np.array([10, 650, 1100]))
    assert list(allowed.ids[:, 0]) == [10, 650, 1100]
    store.delete([650, 1100])
    gone = store.search(q, 10).ids
    assert 650 not in gone and 1100 not in gone and store.count() == 1498
    moved = _unit(1, 42)
    store.upsert(np.array([700]), moved)  # an adopted id replaced: the new vector answers
    assert store.search(moved, 1).ids[0, 0] == 700
    assert store.search(vecs[[700]], 3).ids[0, 0] != 700
    store.upsert(np.arange(5000, 5100), _unit(100, 7))  # after the adopted graph
    store.flush()
    reader = make_store(spec, folders[0]).open()
    try:
        assert reader.count() == 1598 and reader.search(moved, 1).ids[0, 0] == 700
        assert 650 not in reader.search(q, 10).ids
    finally:
        reader.close()
        store.close()


def test_an_adopted_id_the_store_holds_answers_with_the_adopted_vector(tmp_path):
    spec = "faiss:Flat"
    old, new = _unit(20, 1), _unit(20, 2)
    base = _store(tmp_path / "a", spec, np.arange(20), old, "old")
    seg = _store(tmp_path / "b", spec, np.arange(10, 30), np.concatenate([new[:10], _unit(10, 3)]), "new")
    store = make_store(spec, base).open()
    store.adopt(seg)
    try:
        assert store.count() == 30 and store.search(new[:10], 1).ids[:, 0].tolist() == list(range(10, 20))
        assert store.get_payloads([15])[0]["part"] == "new" and store.dead_positions() == 10
    finally:
        store.close()


def test_a_store_of_another_kind_is_refused_and_nothing_changes(tmp_path):
    base = _store(tmp_path / "a", "faiss:Flat", np.arange(20), _unit(20, 1), 0)
    other = _store(tmp_path / "b", "faiss:HNSW16", np.arange(20, 40), _unit(20, 2), 1)
    before = sorted(p.name for p in base.iterdir())
    store = make_store("faiss:Flat", base).open()
    try:
        with pytest.raises(StoreError, match="factory is 'HNSW16', this store's 'Flat'.*Nothing was changed"):
            store.adopt(other)
        assert store.count() == 20 and (other / "index.faiss").exists()
    finally:
        store.close()
    assert sorted(p.name for p in base.iterdir()) == before


def test_a_kill_between_the_ids_and_the_graph_file_leaves_the_store_as_it_was(tmp_path):
    spec = "faiss:HNSW16"
    base = _store(tmp_path / "a", spec, np.arange(300), _unit(300, 1), 0)
    seg = _store(tmp_path / "b", spec, np.arange(300, 500), _unit(200, 2), 1)
    # the child dies by SIGKILL at the graph file's move, after the ids were written
    child = textwrap.dedent(f"""
        import os, signal
        from slimvec.connectors import make_store
        store = make_store({spec!r}, {str(base)!r}).open()
        real = os.replace
        def die(src, dst):
            if str(src).endswith("index.faiss"):
                os.kill(os.getpid(), signal.SIGKILL)
            return real(src, dst)
        os.replace = die
        store.adopt({str(seg)!r})
    """)
    done = subprocess.run([sys.executable, "-c", child], env={**os.environ}, timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert len(np.load(base / "ids.npy")) == 500  # the ids were ahead of the graph
    store = make_store(spec, base).open()
    try:
        assert store.count() == 300 and int(store.ids().max()) == 299
        assert store.adopt(seg) == 200 and store.count() == 500  # done again, whole
        q = _unit(5, 3)
        assert store.search(q, 5).ids.min() >= 0
    finally:
        store.close()
