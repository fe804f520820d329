"""The FAISS store's tail (slimvec.connectors.faiss_tail): a flush that adds few vectors to a large
index writes them beside the index file instead of rewriting it; opening adds them back; a
checkpoint (too many, finalize, a writer's close) writes the index whole again."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.connectors.faiss_tail import TAIL_FILE, TAIL_MAX_ROWS, tail_limit
from slimvec.errors import StoreError

SPEC = "faiss:HNSW16,SQ8,efc=64"


def _unit(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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


def test_a_small_commit_writes_a_tail_not_the_index_and_readers_see_it(built):
    index_sha = _sha(built / "index.faiss")
    writer = make_store(SPEC, built).open()
    new = _unit(40, seed=1)
    writer.upsert(np.arange(5000, 5040), new)
    writer.flush()
    assert _sha(built / "index.faiss") == index_sha  # not rewritten
    assert (built / TAIL_FILE).exists()
    reader = _reader(built)
    try:
        assert reader.count() == 1040
        assert (reader.search(new[:20], 1).ids[:, 0] == np.arange(5000, 5020)).mean() >= 0.9
    finally:
        reader.close()
    writer.upsert(np.arange(6000, 6010), _unit(10, seed=2))  # the next commit rewrites the tail whole
    writer.flush()
    reader = _reader(built)
    assert reader.count() == 1050
    reader.close()
    writer.close()  # a writer's close checkpoints: no tail left
    assert not (built / TAIL_FILE).exists() and _sha(built / "index.faiss") != index_sha
    reader = _reader(built)
    assert reader.count() == 1050
    reader.close()


def test_past_an_eighth_of_the_index_the_flush_writes_the_index_whole(built):
    assert tail_limit(1000) == 125 and tail_limit(10 ** 7) == TAIL_MAX_ROWS
    writer = make_store(SPEC, built).open()
    writer.upsert(np.arange(5000, 5126), _unit(126, seed=3))  # 126 > 1000 // 8
    writer.flush()
    assert not (built / TAIL_FILE).exists()
    reader = _reader(built)
    assert reader.count() == 1126
    reader.close()
    writer.close()


def test_a_stale_tail_left_by_a_kill_after_a_checkpoint_is_skipped(built, tmp_path):
    writer = make_store(SPEC, built).open()
    writer.upsert(np.arange(5000, 5040), _unit(40, seed=4))
    writer.flush()
    shutil.copy(built / TAIL_FILE, tmp_path / "old-tail.npy")
    writer.close()  # checkpoint: the index file holds the 40 now, the tail is removed
    shutil.copy(tmp_path / "old-tail.npy", built / TAIL_FILE)  # as if killed before the unlink
    reader = _reader(built)
    try:
        assert reader.count() == 1040 and reader._index.ntotal == 1040  # not added twice
    finally:
        reader.close()


def test_a_tail_that_does_not_continue_the_index_is_refused(built):
    from slimvec.connectors.faiss_tail import pack_tail

    np.save(built / TAIL_FILE, pack_tail(1003, _unit(5, seed=5)))  # a gap after position 999
    with pytest.raises(StoreError, match="does not continue its index file"):
        _reader(built)
    np.save(built / TAIL_FILE, np.zeros((3, 7), dtype=np.float32))
    with pytest.raises(StoreError, match=r"expected float32 rows of 34 values"):
        _reader(built)
