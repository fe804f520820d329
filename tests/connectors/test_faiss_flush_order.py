"""A kill -9 in the middle of a FAISS flush must leave a store that opens and resumes.

The FAISS store keeps the position -> id array and the vectors (the index file, and chunk files of
the vectors added since it was written), each written by an atomic rename, so a kill can land
between them. The ids are written first and only ever grow by appending, so the state a kill can
leave is "ids ahead of the vectors", which open() cuts back.
(tests/reliability/test_kill_migrate.py hit the old order, index first, about one run in four.)
"""

from __future__ import annotations

import numpy as np

from slimvec.connectors import make_store
from slimvec.connectors.faiss_store import IDS_FILE, INDEX_FILE, FaissStore


def _vecs(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 16)).astype(np.float32)


def test_kill_between_ids_and_index_rename_reopens_at_the_index(tmp_path):
    folder = tmp_path / "store"
    store = make_store("faiss:Flat", folder).create(16)
    first = _vecs(100, 0)
    store.upsert(np.arange(100), first, [{"i": i} for i in range(100)])
    store.flush()
    before = {p.name for p in folder.glob("tail*.npy")}
    store.upsert(np.arange(100, 150), _vecs(50, 1), [{"i": i} for i in range(100, 150)])
    store.flush()  # the ids rename of this flush happened ...
    for chunk in {p.name for p in folder.glob("tail*.npy")} - before:
        (folder / chunk).unlink()  # ... the vectors' chunk did not (kill -9)
    store._index = None  # the killed process never closes

    reopened = make_store("faiss:Flat", folder).open()
    assert reopened.count() == 100
    hit = reopened.search(first[:5], 1)
    assert hit.ids[:, 0].tolist() == [0, 1, 2, 3, 4]
    # the resumed writer re-upserts the rows after the last commit: nothing lost, nothing twice
    reopened.upsert(np.arange(100, 150), _vecs(50, 1), [{"i": i} for i in range(100, 150)])
    reopened.flush()
    reopened.close()
    final = make_store("faiss:Flat", folder).open()
    assert final.count() == 150
    res = final.search(_vecs(50, 1)[:3], 1)
    assert res.ids[:, 0].tolist() == [100, 101, 102]
    final.close()


def test_flush_writes_ids_before_index(tmp_path):
    """The order is the guarantee: the index file is never newer than the ids file."""
    folder = tmp_path / "store"
    store = make_store("faiss:Flat", folder).create(16)
    store.upsert(np.arange(10), _vecs(10, 0))
    order: list[str] = []
    import slimvec.connectors.faiss_store as fs

    real_atomic = fs.write_file_atomic

    def spy(path, writer):
        order.append(path.name)
        return real_atomic(path, writer)

    fs.write_file_atomic = spy
    try:
        store.flush()
    finally:
        fs.write_file_atomic = real_atomic
    vectors = [i for i, name in enumerate(order) if name == INDEX_FILE or name.startswith("tail")]
    assert vectors and order.index(IDS_FILE) < min(vectors)
    store.close()


def test_a_replaced_vector_stays_hidden_after_reopen_and_readers_build_no_id_map(tmp_path):
    """A document re-upserted with a new vector leaves a replaced copy in the FAISS index; after
    reopening, only the newer copy is found and counted. A reader answers from the ids array alone
    (the id -> position dict is built only when the store is written to)."""
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(50, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    store = FaissStore(str(tmp_path / "s"), factory="Flat").create(8)
    store.upsert(np.arange(1, 51), vecs)
    store.upsert(np.array([7]), -vecs[6:7])  # document 7 now points the other way
    store.close()
    reader = FaissStore(str(tmp_path / "s")).open()
    assert reader._pos is None  # noqa: SLF001 - the point of the test
    assert reader.count() == 50
    hits = reader.search(vecs[6:7], 50).ids[0].tolist()
    assert 7 not in hits[:49] and hits.count(7) <= 1  # the old copy (the best match) is hidden
    assert reader.search(-vecs[6:7], 1).ids[0, 0] == 7
    reader.upsert(np.array([7]), -vecs[6:7])  # same vector again: a no-op, through the built map
    assert reader.count() == 50 and reader._pos is not None  # noqa: SLF001
    reader.close()
