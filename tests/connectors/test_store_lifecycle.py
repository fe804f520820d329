"""Delete, filtered search and payload updates: one contract over the four real stores (issue 25
items 1-3, store layer). Real files, small data (400 MiniLM vectors)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.filters import parse_filter
from tests.connectors.stores import variant_specs

N = 400
STORES = variant_specs()
GROUP3 = parse_filter({"must": [{"key": "g", "match": {"value": 3}}]})
FLAGGED = parse_filter({"must": [{"key": "flag", "match": {"value": True}}]})


@pytest.fixture(scope="module")
def data(minilm_vectors):
    vecs = np.ascontiguousarray(minilm_vectors[:N])
    ids = np.arange(N, dtype=np.int64) * 7919 + (1 << 40)
    payloads = [{"g": i % 10, "flag": i % 7 == 0, "tags": ["a", "b"] if i % 2 else ["c"]} for i in range(N)]
    return ids, vecs, payloads


@pytest.fixture(scope="module", params=STORES)
def built(request, data, tmp_path_factory):
    """Each store built once (qdrant-client's local mode takes ~20 s for 600 points on a loaded
    machine); every test works on a copy of its files."""
    ids, vecs, payloads = data
    folder = tmp_path_factory.mktemp("built") / "store"
    s = make_store(request.param, folder).create(vecs.shape[1], "cosine")
    s.upsert(ids, vecs, payloads)
    s.finalize()
    s.close()
    return request.param, folder


@pytest.fixture
def store(built, tmp_path):
    spec, folder = built
    shutil.copytree(folder, tmp_path / "store")
    s = make_store(spec, tmp_path / "store").open()
    yield spec, tmp_path / "store", s
    s.close()


def _reopen(spec, folder, store):
    store.flush()
    store.close()
    return make_store(spec, folder).open()


def test_delete_never_returns_the_id_count_exact_and_reopen_keeps_it(store, data):
    spec, folder, s = store
    ids, vecs, _ = data
    gone = ids[::3]
    assert s.delete(np.concatenate([gone, gone[:5], [12345]])) == len(gone)  # unknown / repeated ignored
    assert s.count() == N - len(gone)
    assert s.delete(gone[:10]) == 0  # already deleted
    s = _reopen(spec, folder, s)
    try:
        assert s.count() == N - len(gone)
        np.testing.assert_array_equal(s.ids(), np.setdiff1d(ids, gone))
        for k in (10, 200):
            found = s.search(vecs[::25], k).ids
            assert not np.isin(found, gone).any(), f"k={k}"
        # a deleted vector's own query finds something else first
        assert not np.isin(s.search(vecs[[0, 3, 6]], 5).ids, gone).any()  # their own vectors
        found = s.search(vecs[::25], 20, filter=GROUP3).ids
        assert not np.isin(found, gone).any()
        assert s.get_payloads([int(gone[0]), int(ids[1])])[0] is None
        assert not np.isin(s.filter_ids(GROUP3), gone).any()
    finally:
        s.close()


def test_re_upsert_of_a_deleted_id_works(store, data):
    spec, folder, s = store
    ids, vecs, payloads = data
    assert s.delete(ids[:5]) == 5
    s.flush()
    s.upsert(ids[:2], vecs[:2], payloads[:2])
    assert s.count() == N - 3
    s = _reopen(spec, folder, s)
    try:
        assert s.count() == N - 3
        assert s.search(vecs[:2], 1).ids[:, 0].tolist() == ids[:2].tolist()
        assert s.get_payloads([int(ids[0])]) == [payloads[0]]
        assert not np.isin(s.search(vecs[:5], 10).ids, ids[2:5]).any()
    finally:
        s.close()


def test_filtered_search_returns_only_matches_with_recall(store, data):
    spec, _, s = store
    ids, vecs, payloads = data
    match = np.array([p["g"] == 3 for p in payloads])
    np.testing.assert_array_equal(s.filter_ids(GROUP3), np.sort(ids[match]))
    flagged = np.array([p["flag"] for p in payloads])
    np.testing.assert_array_equal(s.filter_ids(FLAGGED), np.sort(ids[flagged]))  # bool match
    queries = vecs[1::40]
    sims = queries @ vecs[match].T
    truth = ids[match][np.argsort(-sims, axis=1)[:, :10]]
    got = s.search(queries, 10, filter=GROUP3)
    assert np.isin(got.ids, ids[match]).all()
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got.ids, truth)])
    assert recall >= 0.9, (spec, recall)
    got = s.search(queries, 10, filter=FLAGGED)
    assert np.isin(got.ids, ids[flagged]).all()
    # an explicit allowed-id array (what the index's planner passes)
    allowed = ids[[5, 50, 300]]
    got = s.search(queries[:2], 5, filter=allowed)
    assert set(got.ids[got.ids >= 0].tolist()) <= set(allowed.tolist()) and (got.ids[:, 3:] == -1).all()


def test_set_payload_merge_overwrite_and_delete_keys(store, data):
    spec, folder, s = store
    ids, _, payloads = data
    a, b = int(ids[1]), int(ids[2])
    assert s.set_payload([a, 999], {"lang": "en", "g": 99}) == 1
    assert s.set_payload([b], {"only": 1}, overwrite=True) == 1
    assert s.delete_payload_keys([a], ["tags"]) == 1
    s = _reopen(spec, folder, s)
    try:
        pa, pb = s.get_payloads([a, b])
        assert pa == {"g": 99, "flag": payloads[1]["flag"], "lang": "en"}
        assert pb == {"only": 1}
        assert s.filter_ids(parse_filter({"must": [{"key": "lang", "match": {"value": "en"}}]})).tolist() == [a]
    finally:
        s.close()


def test_full_vectors_forget_deleted_ids_and_compact(data, tmp_path):
    from slimvec.connectors.base import SearchResult
    from slimvec.connectors.fullvectors import FullVectors

    ids, vecs, _ = data
    fv = FullVectors.create(tmp_path / "full", vecs.shape[1])
    fv.append(ids[:50], vecs[:50])
    fv.commit()
    assert fv.delete(np.concatenate([ids[:10], [7]])) == 10
    fv.commit()
    fv = FullVectors.open(tmp_path / "full")  # durable
    assert len(fv) == 40 and not fv.get(ids[:10])[1].any() and fv.get(ids[10:12])[1].all()
    cands = SearchResult(ids[None, :20].copy(), np.zeros((1, 20), np.float32))
    got = fv.rerank(vecs[:1], cands, 20).ids
    assert not np.isin(got, ids[:10]).any() and (got[0, 10:] == -1).all()
    fv.append(ids[:1], vecs[:1])  # re-upsert brings it back
    fv.commit()
    assert fv.get(ids[:1])[1].all() and fv.dead_rows() == 10 + 10  # old rows of 0..9 + their tombstones
    new = fv.compact_into(tmp_path / "full2")
    assert new.rows == len(new) == 41 and new.dead_rows() == 0
    np.testing.assert_allclose(new.get(ids[:1])[0], fv.get(ids[:1])[0])
    np.testing.assert_array_equal(new.ids(), np.sort(np.concatenate([ids[:1], ids[10:50]])))
