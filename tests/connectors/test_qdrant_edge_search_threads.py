"""Issue 28 item 4: Qdrant Edge answers a query on one search-pool thread by default.

The engine's default pool (a thread per CPU) fans every query out over its segments' threads; on
a loaded two-core machine the query then waits for each thread to be scheduled (p50 1.3 ms with
one thread against 7.8-12 ms with the pool, same ids: ``python -m benchmarks search-profile``). These
tests check what can be checked without a clock: the shard is created with one search thread,
``search_threads=0`` keeps the engine's pool, and both find the same points with the same scores.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.errors import ConfigError

N, DIM = 400, 16


def _store(tmp_path, spec, metric="cosine"):
    vecs = np.random.default_rng(7).standard_normal((N, DIM)).astype(np.float32)
    store = make_store(spec, tmp_path / spec.replace(":", "_").replace(",", "_")).create(DIM, metric)
    store.upsert(np.arange(N), vecs)
    store.finalize()
    return store, vecs


def _edge_config(store):
    return json.loads((store._folder(store.location) / "shard" / "edge_config.json").read_text())


def test_a_new_shard_searches_on_one_pool_thread_unless_asked(tmp_path):
    one, _ = _store(tmp_path, "qdrant-edge")
    pool, _ = _store(tmp_path, "qdrant-edge:search_threads=0")
    try:
        assert _edge_config(one).get("max_search_threads") == 1
        assert _edge_config(pool).get("max_search_threads") is None  # the engine's CPU-derived pool
    finally:
        one.close()
        pool.close()
    reopened = make_store("qdrant-edge", one.location).open()  # the setting lives in the shard
    try:
        assert _edge_config(reopened).get("max_search_threads") == 1
        assert reopened.search(np.ones((1, DIM), np.float32), 5).ids.shape == (1, 5)
    finally:
        reopened.close()
    with pytest.raises(ConfigError, match="search_threads"):
        make_store("qdrant-edge:search_threads=-1", tmp_path / "bad")


@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_one_thread_finds_what_the_pool_finds_with_the_same_scores(tmp_path, metric):
    one, vecs = _store(tmp_path, "qdrant-edge", metric)
    pool, _ = _store(tmp_path, "qdrant-edge:search_threads=0", metric)
    queries = vecs[:40] + 0.05
    try:
        for k in (10, 320):  # 320: the default recipe's candidates at depth 32
            a, b = one.search(queries, k), pool.search(queries, k)
            np.testing.assert_array_equal(a.ids, b.ids)
            np.testing.assert_array_equal(a.scores, b.scores)
        # and both are the exact answer when asked for it (scores: similarity, or -squared L2)
        got = one.search(queries, 10, exact=True)
        if metric == "l2":
            want = -((queries[:, None, :] - vecs[None, :, :]) ** 2).sum(axis=2)
        else:
            unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
            want = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ unit.T
        top = np.argsort(-want, axis=1, kind="stable")[:, :10]
        assert (got.ids == top).mean() > 0.99
        np.testing.assert_allclose(got.scores, np.take_along_axis(want, got.ids, axis=1), rtol=1e-4, atol=1e-4)
    finally:
        one.close()
        pool.close()
