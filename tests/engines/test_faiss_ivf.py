"""FAISS IVF built in parallel (Ray tasks) equals one process adding the same vectors."""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.engines.faiss_ivf import add_shard, build_ivf_parallel, ivf_lists, train_ivf
from slimvec.reducers import make_reducer


@pytest.mark.parametrize("factory", ["IVF16,PQ8", "IVF16,Flat"])
def test_parallel_ivf_merge_equals_single_process_build(ray_runtime, minilm_vectors, factory):
    reducer = make_reducer("pca:32").fit(minilm_vectors[:1000])
    X = reducer.transform(minilm_vectors).astype(np.float32)
    trained = train_ivf(factory, X[:1000])  # trained once, after the reducer
    import faiss

    single = faiss.deserialize_index(add_shard(trained, np.arange(len(X)), X))
    merged = build_ivf_parallel(trained, X, workers=2)  # two Ray tasks, inverted lists merged
    assert merged.ntotal == single.ntotal == len(X)
    a, b = ivf_lists(single), ivf_lists(merged)
    assert sum(len(ids) for ids, _ in b) == len(X)
    for (ids_a, codes_a), (ids_b, codes_b) in zip(a, b):
        np.testing.assert_array_equal(ids_a, ids_b)
        assert codes_a == codes_b
    q = X[:50].copy()
    faiss.normalize_L2(q)
    for index in (single, merged):
        faiss.extract_index_ivf(index).nprobe = 4
    da, ia = single.search(q, 10)
    db, ib = merged.search(q, 10)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_allclose(da, db)
    assert (ia[:, 0] == np.arange(50)).mean() > 0.5  # the index finds the query's own vector
