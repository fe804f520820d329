"""The FAISS store's appendable segment (slimvec.connectors.faiss_segments): a graph store
acknowledges a write before its graph holds it, finds it exactly meanwhile, inserts it in a
background round on a copy of the graph, and persists it as an immutable chunk beside the index
file; a checkpoint writes the graph whole and drops the chunks it holds."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.connectors.faiss_segments import MAX_CHUNKS, ROUND_MIN, TAIL_MAX_ROWS, pack_tail, tail_limit
from slimvec.errors import StoreError
from slimvec.filters import parse_filter

SPEC = "faiss:HNSW16,SQ8,efc=64"


def _unit(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _chunks(folder) -> list[str]:
    return sorted(p.name for p in folder.glob("tail*.npy"))


@pytest.fixture
def built(tmp_path):
    folder = tmp_path / "s"
    store = make_store(SPEC, folder)
    store.create(32, "cosine")
    store.upsert(np.arange(1000), _unit(1000))
    store.finalize()
    store.close()
    return folder


def _reader(folder):
    return make_store(SPEC, folder).open()


def test_a_small_commit_writes_a_chunk_not_the_index_and_readers_find_it_exactly(built):
    index_sha = _sha(built / "index.faiss")
    writer = make_store(SPEC, built).open()
    new = _unit(40, seed=1)
    writer.upsert(np.arange(5000, 5040), new)
    writer.flush()
    assert _sha(built / "index.faiss") == index_sha and len(_chunks(built)) == 1
    reader = _reader(built)
    try:
        assert reader.count() == 1040 and reader._index.ntotal == 1000  # in the appendable segment
        assert (reader.search(new, 1).ids[:, 0] == np.arange(5000, 5040)).all()  # exactly
    finally:
        reader.close()
    writer.upsert(np.arange(6000, 6010), _unit(10, seed=2))  # the next commit adds a chunk
    writer.flush()
    assert len(_chunks(built)) == 2
    reader = _reader(built)
    assert reader.count() == 1050
    reader.close()
    writer.close()  # a writer's close inserts every vector and writes the graph: no chunk left
    assert _chunks(built) == [] and _sha(built / "index.faiss") != index_sha
    reader = _reader(built)
    assert reader.count() == 1050 and reader._index.ntotal == 1050
    reader.close()


def test_writes_are_found_exactly_before_the_background_round_puts_them_in_the_graph(tmp_path):
    X = _unit(3 * ROUND_MIN, seed=7)
    store = make_store(SPEC, tmp_path / "s").create(32, "cosine")
    for lo in range(0, len(X), 512):  # each batch is searchable as soon as it is acknowledged
        store.upsert(np.arange(lo, lo + 512), X[lo:lo + 512])
        assert (store.search(X[lo:lo + 512], 1).ids[:, 0] == np.arange(lo, lo + 512)).all()
    assert store._builder.busy or store._index.ntotal > 0  # a round started past ROUND_MIN
    store.drain()
    assert store._index.ntotal == len(X) and not store._builder.busy
    assert (store.search(X, 1).ids[:, 0] == np.arange(len(X))).mean() > 0.95  # through the graph
    hits = store.search(X[:5], 3, filter=parse_filter({"must": [{"has_id": [1, 2, 3, 4000]}]}))
    assert set(hits.ids[:, :4].ravel().tolist()) <= {1, 2, 3, 4000, -1}
    store.close()


def test_filters_deletes_and_replacements_cover_both_parts(tmp_path):
    X = _unit(600, seed=8)
    spec = "faiss:HNSW16"  # trained from the start: the first 300 reach the graph at drain()
    store = make_store(spec, tmp_path / "s").create(32, "cosine")
    store.upsert(np.arange(300), X[:300], [{"part": "graph"}] * 300)
    store.drain()  # the first 300 in the graph, the rest appended
    store.upsert(np.arange(300, 600), X[300:], [{"part": "appended"}] * 300)
    assert store._index.ntotal == 300
    flt = parse_filter({"must": [{"key": "part", "match": {"value": "appended"}}]})
    res = store.search(X[:10], 5, filter=flt)
    assert ((res.ids >= 300) | (res.ids == -1)).all() and (res.ids[:, 0] >= 300).all()
    assert store.delete([450, 10]) == 2
    assert 450 not in store.search(X[450:451], 5).ids and 10 not in store.search(X[10:11], 5).ids
    store.upsert(np.array([451]), X[0:1])  # a changed vector: the old position drops out
    top = store.search(X[0:1], 2).ids[0].tolist()
    assert sorted(top) == [0, 451] and store.count() == 598
    store.close()
    again = make_store(spec, tmp_path / "s").open()
    assert again.count() == 598 and 450 not in again.ids()
    assert sorted(again.search(X[0:1], 2).ids[0].tolist()) == [0, 451]
    again.close()


def test_past_half_the_file_the_flush_writes_the_graph_whole(built):
    assert tail_limit(1000) == TAIL_MAX_ROWS and tail_limit(10000) == 5000 and tail_limit(10 ** 9) == 1 << 18
    writer = make_store(SPEC, built).open()
    writer.upsert(np.arange(5000, 7049), _unit(2049, seed=3))  # 2049 > TAIL_MAX_ROWS
    writer.drain()
    writer.flush()
    assert _chunks(built) == []
    reader = _reader(built)
    assert reader.count() == 3049 and reader._index.ntotal == 3049
    reader.close()
    writer.close()


def test_many_commits_merge_their_chunks(built):
    writer = make_store(SPEC, built).open()
    for i in range(MAX_CHUNKS + 3):
        writer.upsert(np.array([5000 + i]), _unit(1, seed=10 + i))
        writer.flush()
        assert len(_chunks(built)) <= MAX_CHUNKS
    reader = _reader(built)
    assert reader.count() == 1000 + MAX_CHUNKS + 3
    reader.close()
    writer.close()


def test_a_stale_chunk_left_by_a_kill_after_a_checkpoint_is_skipped(built, tmp_path):
    writer = make_store(SPEC, built).open()
    writer.upsert(np.arange(5000, 5040), _unit(40, seed=4))
    writer.flush()
    (chunk,) = _chunks(built)
    shutil.copy(built / chunk, tmp_path / "old.npy")
    writer.close()  # checkpoint: the index file holds the 40 now, the chunk is removed
    shutil.copy(tmp_path / "old.npy", built / chunk)  # as if killed before the unlink
    reader = _reader(built)
    try:
        assert reader.count() == 1040 and reader._index.ntotal == 1040 and reader._rows.n == 0
    finally:
        reader.close()


def test_a_chunk_that_does_not_continue_the_index_is_refused(built):
    np.save(built / "tail-000000001003.npy", pack_tail(1003, _unit(5, seed=5)))  # a gap after 999
    with pytest.raises(StoreError, match="does not continue its index file"):
        _reader(built)
    np.save(built / "tail-000000001003.npy", np.zeros((3, 7), dtype=np.float32))
    with pytest.raises(StoreError, match=r"expected float32 rows of 34 values"):
        _reader(built)
