"""LeanVec (arXiv 2312.16335): the ID fit is uncentred PCA, the OOD fit lowers the inner-product
loss for a shifted query distribution, queries go through the query projection, and the two
matrices survive save/load."""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.errors import ConfigError
from slimvec.reducers import load_reducer, make_reducer
from slimvec.reducers.leanvec import _fw_block, leanvec_loss


def test_id_fit_is_uncentred_second_moment_pca(minilm_vectors):
    X = minilm_vectors[:1000]
    red = make_reducer("leanvec:16").fit(X)
    evals, evecs = np.linalg.eigh(X.astype(np.float64).T @ X / len(X))
    top = evecs[:, np.argsort(evals)[::-1][:16]]
    # same subspace as the top eigenvectors of E[x xᵀ] (not of the covariance)
    overlap = np.linalg.svd(red.components_.astype(np.float64) @ top, compute_uv=False)
    assert overlap.min() > 0.999
    np.testing.assert_array_equal(red.transform_query(X[:5]), red.transform(X[:5]))
    assert not np.allclose(red.components_, make_reducer("pca:16").fit(X).components_, atol=1e-3)


def test_frank_wolfe_step_never_raises_the_loss():
    rng = np.random.default_rng(0)
    d, D = 20, 5
    Xs, Qs = rng.standard_normal((500, d)), rng.standard_normal((300, d)) * np.linspace(3, 0.1, d)
    KX, KQ = Xs.T @ Xs / 500, Qs.T @ Qs / 300
    A = B = np.linalg.qr(rng.standard_normal((d, D)))[0].T
    losses = [leanvec_loss(A, B, KQ, KX)]
    for _ in range(10):
        A = _fw_block(A, B, KQ, KX, "A")
        B = _fw_block(A, B, KQ, KX, "B")
        losses.append(leanvec_loss(A, B, KQ, KX))
    assert all(b <= a + 1e-9 for a, b in zip(losses, losses[1:]))
    assert losses[-1] < 0.9 * losses[0]
    assert np.linalg.norm(A, 2) <= 1 + 1e-9 and np.linalg.norm(B, 2) <= 1 + 1e-9  # stays in the hull


def test_ood_fit_beats_id_on_shifted_queries(minilm_vectors, tmp_path):
    X = minilm_vectors[:1500]
    # queries from another distribution: the database's low-variance directions, amplified
    _, _, Vt = np.linalg.svd(X - X.mean(0), full_matrices=False)
    Q = minilm_vectors[1500:2500] @ Vt[200:260].T @ Vt[200:260] * 5 + minilm_vectors[1500:2500] * 0.2
    KX = X.astype(np.float64).T @ X / len(X)
    KQ = Q.astype(np.float64).T @ Q / len(Q)
    idv = make_reducer("leanvec:16").fit(X)
    ood = make_reducer("leanvec:16,iters=10").fit(X, queries=Q)
    loss_id = leanvec_loss(idv.query_components_.astype(float), idv.components_.astype(float), KQ, KX)
    loss_ood = leanvec_loss(ood.query_components_.astype(float), ood.components_.astype(float), KQ, KX)
    assert loss_ood < 0.85 * loss_id  # measured 0.74x
    assert not np.allclose(ood.transform_query(Q[:3]), ood.transform(Q[:3]))
    ood.save(tmp_path / "r")
    back = load_reducer(tmp_path / "r")
    np.testing.assert_allclose(back.transform_query(Q[:20]), ood.transform_query(Q[:20]), atol=1e-6)
    np.testing.assert_allclose(back.transform(X[:20]), ood.transform(X[:20]), atol=1e-6)
    # the query sample may also come from a file (the spec option)
    np.save(tmp_path / "q.npy", Q)
    from_file = make_reducer(f"leanvec:16,iters=10,queries={tmp_path / 'q.npy'}").fit(X)
    np.testing.assert_allclose(from_file.components_, ood.components_, atol=1e-6)


def test_bad_query_sample_is_named(minilm_vectors, tmp_path):
    with pytest.raises(ConfigError, match="dimension 100"):
        make_reducer("leanvec:8").fit(minilm_vectors[:100], queries=minilm_vectors[:10, :100])
    with pytest.raises(ConfigError, match="missing.npy"):
        make_reducer(f"leanvec:8,queries={tmp_path / 'missing.npy'}").fit(minilm_vectors[:100])
