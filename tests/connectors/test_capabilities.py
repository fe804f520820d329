"""What differs between stores is declared on the store classes, and the declarations are true
of the real stores (files on disk, locking, full vectors), so callers need no store names."""

from __future__ import annotations

import fnmatch
import os

import numpy as np
import pytest

from slimvec.connectors import make_store, store_class, store_names
from slimvec.connectors.base import VectorStore
from slimvec.errors import ConfigError, StoreError
from tests.connectors.stores import snapshot_specs, store_specs

#: stores with a local size model (the components they hold in RAM)
LOCAL = [s for s in store_specs() if store_class(s).resident_components]


def _build(name: str, folder, n: int = 300, dim: int = 16) -> VectorStore:
    vecs = np.random.default_rng(0).standard_normal((n, dim)).astype(np.float32)
    store = make_store(name, folder).create(dim)
    store.upsert(np.arange(n), vecs, [{"row": i} for i in range(n)])
    store.finalize()
    store.flush()
    return store


def _files(folder) -> list[str]:
    return sorted(os.path.relpath(os.path.join(root, f), folder)
                  for root, _, files in os.walk(folder) for f in files)


def test_store_class_by_name_spec_and_unknown():
    for name in store_names():
        assert store_class(name).name == name
    assert store_class("faiss:IVF256,PQ16,nprobe=8").name == "faiss"
    assert store_class("QDRANT:http://localhost:6333").name == "qdrant"
    with pytest.raises(ConfigError, match="Known: qdrant-edge, qdrant, faiss, hnsw"):
        store_class("pinecone:x")


@pytest.mark.parametrize("name", snapshot_specs())
def test_snapshot_files_name_every_file_a_flushed_store_keeps(name, tmp_path):
    store = _build(name, tmp_path / "s")
    store.close()
    patterns = store_class(name).snapshot_files
    volatile = ("-wal", "-shm", "-journal")
    kept = [f for f in _files(tmp_path / "s") if not f.endswith(volatile)]
    assert kept, "the store wrote no files"
    for f in kept:
        assert any(fnmatch.fnmatch(f, p) for p in patterns), f"{f} is not declared in snapshot_files"


def test_engines_that_rewrite_files_declare_no_snapshots_and_a_reader_lock():
    assert store_class("qdrant-edge").snapshot_files == ()
    assert store_class("qdrant").snapshot_files == ()
    assert store_class("qdrant-edge").needs_reader_lock("qdrant-edge")
    assert store_class("qdrant-edge").needs_reader_lock("qdrant-edge:/data/shard")
    assert store_class("qdrant").needs_reader_lock("qdrant")              # local mode in the folder
    assert store_class("qdrant").needs_reader_lock("qdrant:/data/q")
    assert not store_class("qdrant").needs_reader_lock("qdrant:https://q.example:6333,collection=c")
    assert not store_class("faiss").needs_reader_lock("faiss:IVF16,Flat")
    assert not store_class("hnsw").needs_reader_lock("hnsw")


def test_qdrant_edge_holds_its_shard_for_itself(tmp_path):
    """What needs_reader_lock declares: a second open of a live shard fails."""
    store = _build("qdrant-edge", tmp_path / "s")
    try:
        with pytest.raises(StoreError):
            make_store("qdrant-edge", tmp_path / "s").open().close()
    finally:
        store.close()


@pytest.mark.parametrize("name", LOCAL)
def test_file_component_sorts_every_file_of_a_real_store(name, tmp_path):
    store = _build(name, tmp_path / "s")
    klass = store_class(name)
    comps = {f: klass.file_component(f) for f in _files(tmp_path / "s")}
    store.close()
    assert comps["slimvec_store.json"] == "meta"
    assert klass.resident_components <= set(comps.values()) | {"quantized"}, comps
    # the bytes of the stored vectors land in a resident component, not in "other"
    assert sum(os.path.getsize(tmp_path / "s" / f) for f, c in comps.items()
               if c in klass.resident_components) >= 300 * 16 * 4


@pytest.mark.parametrize("name", store_names())
def test_keeps_full_vectors_matches_search_rescored(name, tmp_path):
    klass = store_class(name)
    vecs = np.random.default_rng(1).standard_normal((50, 8)).astype(np.float32)
    options = ",full_dim=8" if klass.keeps_full_vectors else ""
    spec = f"{name}:{tmp_path / 's'}{options}" if klass.spec_arg == "location" else name
    with make_store(spec, tmp_path / "s").create(4) as store:
        if klass.keeps_full_vectors:
            store.upsert(np.arange(50), vecs[:, :4], full=vecs)
            res = store.search_rescored(vecs[:2, :4], vecs[:2], 3, 20)
            np.testing.assert_array_equal(res.ids[:, 0], [0, 1])  # full vectors find themselves
        else:
            store.upsert(np.arange(50), vecs[:, :4])
            assert not store.keeps_full
            with pytest.raises(StoreError, match="holds no full vectors"):
                store.search_rescored(vecs[:2, :4], vecs[:2], 3, 20)


def test_spec_argument_declarations():
    assert store_class("faiss").spec_arg == "factory" and store_class("faiss").default_arg == "HNSW32"
    with pytest.raises(ConfigError, match="takes options only"):
        make_store("hnsw:/elsewhere", ".")


def test_qdrant_edge_memory_placement_keeps_results_and_refuses_unknown_values(tmp_path):
    """``memory=cold`` with ``quant=sq8`` (codes in RAM, originals on disk) answers like the default
    layout; an unknown placement is a ConfigError naming the choices."""
    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(300, 16)).astype(np.float32)
    found = {}
    for memory in ("default", "cold"):
        store = make_store(f"qdrant-edge:quant=sq8,memory={memory}", tmp_path / memory).create(16)
        store.upsert(np.arange(1, 301), vecs)
        store.finalize()
        found[memory] = store.search(vecs[:20], 5).ids
        store.close()
    assert (found["cold"][:, 0] == np.arange(1, 21)).all()  # each vector finds itself first
    assert (found["cold"] == found["default"]).mean() > 0.9
    with pytest.raises(ConfigError, match="memory='warm' is not one of default, pinned, cached, cold"):
        make_store("qdrant-edge:memory=warm", tmp_path / "bad")


def test_faiss_pq_skips_polysemous_training_unless_asked(tmp_path):
    """FAISS's factory turns on polysemous training for 8-bit PQ; slimvec never searches with a
    Hamming threshold, so it is off (it cost 60x the build time); the codes search the same."""
    import faiss

    from slimvec.connectors import make_store

    rng = np.random.default_rng(0)
    X = rng.standard_normal((1200, 16)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    ids = np.arange(1, len(X) + 1)
    found = {}
    # one sub-quantizer: polysemous training costs ~1.5 s per sub-quantizer even here
    for label, spec in (("off", "faiss:IVF8,PQ1,nprobe=8"), ("on", "faiss:IVF8,PQ1,nprobe=8,polysemous=true")):
        store = make_store(spec, tmp_path / label).create(16)
        inner = faiss.downcast_index(store._index)
        assert inner.do_polysemous_training is (label == "on")
        store.upsert(ids, X)
        store.finalize()
        found[label] = store.search(X[:50], 10).ids
        store.close()
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found["off"], found["on"])])
    assert overlap >= 0.95
