"""FullVectors.rerank against a brute-force reference: every metric and dtype, padding, unknown
ids, re-written ids (the last write wins), one query and query blocks."""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.connectors import fullvectors
from slimvec.connectors.base import SearchResult
from slimvec.connectors.fullvectors import FullVectors


def _reference(stored: dict[int, np.ndarray], q: np.ndarray, cand: np.ndarray, k: int,
               metric: str) -> tuple[list[list[int]], list[list[float]]]:
    ids_out, scores_out = [], []
    for qi, row in zip(q, cand):
        if metric == "cosine":
            qi = qi / np.linalg.norm(qi)
        scored = []
        for pos, i in enumerate(row):
            if i < 0 or int(i) not in stored:
                continue
            v = stored[int(i)]
            s = -float(np.sum((v - qi) ** 2)) if metric == "l2" else float(v @ qi)
            scored.append((-s, pos, int(i), s))
        scored.sort()
        top = scored[:k]
        ids_out.append([t[2] for t in top] + [-1] * (k - len(top)))
        scores_out.append([t[3] for t in top])
    return ids_out, scores_out


@pytest.mark.parametrize("metric,dtype", [("cosine", "float32"), ("ip", "float32"), ("l2", "float32"),
                                          ("cosine", "float16")])
@pytest.mark.parametrize("block", [None, 1])
def test_rerank_matches_brute_force(tmp_path, monkeypatch, metric, dtype, block):
    if block is not None:  # a block holds one query: the multi-block path
        monkeypatch.setattr(fullvectors, "_RERANK_BLOCK", block)
    rng = np.random.default_rng(7)
    dim, n = 16, 60
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    full = FullVectors.create(tmp_path / "full", dim, dtype, metric)
    full.append(np.arange(n), vecs)
    again = rng.standard_normal((5, dim)).astype(np.float32)
    full.append(np.arange(5), again)  # ids 0-4 written twice: the second write counts
    full.commit()
    stored = {i: vecs[i] for i in range(n)} | {i: again[i] for i in range(5)}
    if metric == "cosine":  # stored unit-length, as append() does
        stored = {i: v / np.linalg.norm(v) for i, v in stored.items()}
    stored = {i: v.astype(dtype).astype(np.float32) for i, v in stored.items()}
    q = rng.standard_normal((4, dim)).astype(np.float32)
    cand = np.stack([rng.permutation(n)[:12] for _ in range(4)]).astype(np.int64)
    cand[1, -3:] = -1  # padding from the reduced index
    cand[2, 4] = 10_000  # an id the full vectors never saw
    for k in (1, 5, 12, 15):
        for rows in (slice(0, 1), slice(0, 4)):  # one query (the fast path) and several
            got = full.rerank(q[rows], SearchResult(cand[rows], np.zeros(cand[rows].shape, np.float32)), k)
            want_ids, want_scores = _reference(stored, q[rows], cand[rows], k, metric)
            assert got.ids.shape == (len(want_ids), k)
            assert got.ids.tolist() == want_ids, (k, rows)
            for got_row, want_row in zip(got.scores, want_scores):
                np.testing.assert_allclose(got_row[:len(want_row)], want_row, rtol=1e-4, atol=1e-4)
                assert np.isneginf(got_row[len(want_row):]).all()
    full.close()


def test_float16_rows_read_back_exactly(tmp_path):
    """The float16 side file is widened with integer operations: every value comes back as numpy's
    own float16 -> float32 conversion gives it (subnormals, signed zeros, the extremes; NaN and
    inf through the helper, since the writer refuses them)."""
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    np.testing.assert_array_equal(fullvectors._as_float32(every.reshape(256, 256)),
                                  every.astype(np.float32).reshape(256, 256))
    finite = every[np.isfinite(every)][: 64 * 48].reshape(64, 48)
    full = FullVectors.create(tmp_path / "f16", 48, dtype="float16", metric="ip")  # stored as given
    full.append(np.arange(64), finite)
    full.commit()
    got, found = full.get(np.array([5, 0, 63, 99]))
    assert got.dtype == np.float32 and found.tolist() == [True, True, True, False]
    np.testing.assert_array_equal(got[:3], finite[[5, 0, 63]].astype(np.float32))
    assert not got[3].any()
    full.close()


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("metric", ["cosine", "ip"])
def test_a_single_query_reranks_as_the_block_path_does(tmp_path, dtype, metric):
    # one query with every candidate known takes the short path (the latency case); it must give
    # the block path's ids and scores (two queries go through the block path)
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((500, 32)).astype(np.float32)
    full = FullVectors.create(tmp_path / "f", 32, dtype=dtype, metric=metric)
    full.append(np.arange(1000, 1500), vecs)
    full.commit()
    for _trial in range(20):
        q = rng.standard_normal((1, 32)).astype(np.float32)
        cand = rng.choice(np.arange(1000, 1500), size=(1, 40), replace=False)
        scores = np.zeros((1, 40), dtype=np.float32)
        one = full.rerank(q, SearchResult(cand, scores), 10)
        two = full.rerank(np.vstack([q, q]), SearchResult(np.vstack([cand, cand]), np.vstack([scores, scores])), 10)
        assert one.ids.tolist() == two.ids[:1].tolist()
        np.testing.assert_allclose(one.scores, two.scores[:1], rtol=1e-6)
    padded = SearchResult(np.array([[1000, -1, 1001]]), np.zeros((1, 3), dtype=np.float32))
    assert full.rerank(q, padded, 3).ids[0, 2] == -1  # padding still sorts last (block path)
    for nothing in ([[-1, -1]], [[7, -1]]):  # only padding / unknown ids: an empty result, no error
        got = full.rerank(q, SearchResult(np.array(nothing), np.zeros((1, 2), np.float32)), 2)
        assert got.ids.tolist() == [[-1, -1]] and np.isneginf(got.scores).all()
    full.close()


@pytest.mark.parametrize("metric,dtype", [("cosine", "float16"), ("ip", "float32"), ("l2", "float16"),
                                          ("l2", "float32")])
@pytest.mark.parametrize("block", [None, 7])
def test_scan_gives_what_reranking_every_allowed_id_gives(tmp_path, monkeypatch, metric, dtype, block):
    """The exact scan (FAISS over gathered rows, issue 51) against :meth:`rerank` of all the
    allowed ids (checked against brute force above): one block and many (``block`` rows each),
    k above the matches, ids never stored, deleted and re-written, several queries."""
    if block is not None:
        monkeypatch.setattr(fullvectors, "_SCAN_BLOCK", block)
    rng = np.random.default_rng(11)
    full = FullVectors.create(tmp_path / "f", 24, dtype=dtype, metric=metric)
    full.append(np.arange(100, 400), rng.standard_normal((300, 24)).astype(np.float32))
    full.append(np.arange(100, 110), rng.standard_normal((10, 24)).astype(np.float32))  # re-written
    full.delete(np.arange(110, 115))
    full.commit()
    q = rng.standard_normal((3, 24)).astype(np.float32)
    for allowed in (np.arange(100, 400, 3), np.array([101, 113, 250, 9_999]), np.arange(100, 400)):
        cand = np.tile(allowed, (3, 1))
        for k in (1, 10, 120):
            got = full.scan(q, allowed, k)
            want = full.rerank(q, SearchResult(cand, np.zeros(cand.shape, np.float32)), k)
            assert got.ids.shape == (3, k) and got.ids.tolist() == want.ids.tolist(), (allowed[:4], k)
            np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, atol=1e-5)
    assert full.scan(q[:1], np.array([], dtype=np.int64), 5).ids.tolist() == [[-1] * 5]
    assert full.scan(q[:1], np.array([9_999, 5]), 5).ids.tolist() == [[-1] * 5]  # none stored
    full.close()


def test_concurrent_scans_each_get_their_own_buffer(tmp_path, monkeypatch):
    """Scans from several threads at once (a service's pool) never share a gather buffer: each
    gets what it gets alone, and no more than ``_SCAN_POOL`` buffers stay afterwards."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(fullvectors, "_SCAN_BLOCK", 16)  # many blocks a scan: interleavings
    rng = np.random.default_rng(5)
    full = FullVectors.create(tmp_path / "f", 24, dtype="float16", metric="cosine")
    full.append(np.arange(2000), rng.standard_normal((2000, 24)).astype(np.float32))
    full.commit()
    qs = rng.standard_normal((40, 24)).astype(np.float32)
    allowed = [np.sort(rng.choice(2000, 300, replace=False)) for _ in qs]
    alone = [full.scan(q[None], a, 10).ids.tolist() for q, a in zip(qs, allowed)]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda i: full.scan(qs[i][None], allowed[i], 10).ids.tolist(), range(40)))
    assert together == alone
    assert len(full._scan_pool) <= fullvectors._SCAN_POOL
    full.close()
