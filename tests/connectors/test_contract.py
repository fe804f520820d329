"""One contract, every registered store (Qdrant Edge, qdrant-client local mode, FAISS, hnswlib),
the list taken from the store registry (tests/connectors/stores.py)."""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.connectors import canonical_store_spec, make_store
from slimvec.errors import ConfigError, DimensionMismatchError, StoreError
from tests.connectors.stores import store_specs

STORES = store_specs()
N_DOCS = 2500


@pytest.fixture(scope="module")
def corpus(minilm_vectors):
    vecs = np.ascontiguousarray(minilm_vectors[:N_DOCS])
    queries = np.ascontiguousarray(minilm_vectors[N_DOCS:N_DOCS + 100])
    ids = np.arange(N_DOCS, dtype=np.int64) * 7919 + (1 << 40)  # large, non-contiguous ids
    sims = queries @ vecs.T
    truth = ids[np.argsort(-sims, axis=1)[:, :10]]
    return ids, vecs, queries, truth


@pytest.fixture(scope="module", params=STORES)
def loaded(request, corpus, tmp_path_factory):
    ids, vecs, _, _ = corpus
    folder = tmp_path_factory.mktemp(request.param)
    store = make_store(request.param, folder / "store").create(vecs.shape[1], "cosine")
    store.upsert(ids, vecs, [{"row": int(i)} for i in range(len(ids))])
    store.finalize()
    store.flush()
    yield request.param, folder, store
    store.close()


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth)]))


def test_recall_against_exact_search(loaded, corpus):
    _, _, store = loaded
    _, _, queries, truth = corpus
    result = store.search(queries, 10)
    assert _recall(result.ids, truth) >= 0.95


def test_id_and_score_conventions(loaded, corpus):
    _, _, store = loaded
    ids, vecs, _, _ = corpus
    result = store.search(vecs[:5], 10)
    assert result.ids.dtype == np.int64 and result.ids.shape == (5, 10)
    assert result.scores.dtype == np.float32
    np.testing.assert_array_equal(result.ids[:, 0], ids[:5])       # a stored vector finds itself
    np.testing.assert_allclose(result.scores[:, 0], 1.0, atol=1e-3)  # cosine similarity, not distance
    assert np.all(np.diff(result.scores, axis=1) <= 1e-6)           # higher is closer, sorted


def test_count_and_payloads(loaded, corpus):
    _, _, store = loaded
    ids, _, _, _ = corpus
    assert store.count() == N_DOCS
    assert store.get_payloads([int(ids[3]), -1, 12345]) == [{"row": 3}, None, None]


def test_upsert_same_id_does_not_duplicate(loaded, corpus):
    _, _, store = loaded
    ids, vecs, _, _ = corpus
    store.upsert(ids[:50], vecs[:50], [{"row": int(i)} for i in range(50)])
    assert store.count() == N_DOCS


def test_wrong_dimension_is_refused(loaded):
    _, _, store = loaded
    with pytest.raises(DimensionMismatchError, match="384"):
        store.search(np.zeros((1, 383), dtype=np.float32), 5)


def test_close_and_reopen_gives_same_results(loaded, corpus):
    name, folder, store = loaded
    _, _, queries, _ = corpus
    before = store.search(queries[:20], 10)
    store.close()
    reopened = make_store(name, folder / "store").open()
    try:
        after = reopened.search(queries[:20], 10)
        assert reopened.count() == N_DOCS
        np.testing.assert_array_equal(before.ids, after.ids)
        np.testing.assert_allclose(before.scores, after.scores, atol=1e-5)
    finally:
        reopened.close()
    loaded_store = make_store(name, folder / "store").open()  # keep the fixture usable
    store.__dict__.update(loaded_store.__dict__)


@pytest.mark.parametrize("name", STORES)
def test_padding_when_k_exceeds_count(name, corpus, tmp_path):
    ids, vecs, _, _ = corpus
    with make_store(name, tmp_path / "s").create(vecs.shape[1]) as store:
        store.upsert(ids[:3], vecs[:3])
        store.finalize()
        result = store.search(vecs[:2], 5)
        assert result.ids.shape == (2, 5)
        assert (result.ids[:, 3:] == -1).all()
        assert np.isneginf(result.scores[:, 3:]).all()
        assert set(result.ids[0, :3]) == set(ids[:3])


@pytest.mark.parametrize("name", STORES)
def test_size_bytes_grows_with_data(name, corpus, tmp_path):
    ids, vecs, _, _ = corpus
    with make_store(name, tmp_path / "s").create(vecs.shape[1]) as store:
        store.upsert(ids[:10], vecs[:10])
        store.finalize()
        store.flush()
        small = store.size_bytes()
        store.upsert(ids[10:2000], vecs[10:2000])
        store.finalize()
        store.flush()
        assert store.size_bytes() > small > 0


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("name", STORES)
def test_other_metrics_keep_higher_is_closer(name, metric, corpus, tmp_path):
    ids, vecs, _, _ = corpus
    with make_store(name, tmp_path / "s").create(vecs.shape[1], metric) as store:
        store.upsert(ids[:300], vecs[:300])
        store.finalize()
        result = store.search(vecs[:3], 5)
        np.testing.assert_array_equal(result.ids[:, 0], ids[:3])
        expected = 0.0 if metric == "l2" else 1.0
        np.testing.assert_allclose(result.scores[:, 0], expected, atol=1e-3)
        assert np.all(np.diff(result.scores, axis=1) <= 1e-6)


def test_faiss_factory_needing_training(corpus, tmp_path):
    ids, vecs, queries, truth = corpus
    store = make_store("faiss:IVF16,Flat,nprobe=16", tmp_path / "s").create(vecs.shape[1])
    store.upsert(ids, vecs)
    assert store.count() == N_DOCS  # buffered until trained, but counted
    store.flush()
    store.close()
    reopened = make_store("faiss", tmp_path / "s").open()  # the buffer survived the restart
    reopened.finalize()
    assert _recall(reopened.search(queries, 10).ids, truth) >= 0.95
    reopened.close()


def test_bad_specs_are_explained(tmp_path):
    with pytest.raises(ConfigError, match="Known: qdrant-edge, qdrant, faiss, hnsw"):
        make_store("pinecone", tmp_path)
    with pytest.raises(ConfigError, match="Accepted: .*ef_construction"):
        canonical_store_spec("hnsw:efc=3")
    with pytest.raises(StoreError, match="No hnsw store"):
        make_store("hnsw", tmp_path / "missing").open()
    assert canonical_store_spec("FAISS") == "faiss:HNSW32"
