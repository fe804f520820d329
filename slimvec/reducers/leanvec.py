"""LeanVec: a linear reduction fitted for the recipe "reduced search, full-dimension rerank".

After Tepper et al., *LeanVec: Searching vectors faster by making them fit* (arXiv 2312.16335),
implemented from the paper's description (its released code is a stub). The reduced index only has
to rank candidates for the full-dimension rerank, so what matters is how well the inner product
``<q, x>`` of a query and a database vector is kept, not how well ``x`` is reconstructed. With a
query projection ``A`` and a database projection ``B`` (both ``D × d``)::

    <q, x>  ≈  <A q, B x>
    loss(A, B) = E_q E_x (qᵀx - qᵀAᵀBx)² = tr((I - AᵀB)ᵀ K_Q (I - AᵀB) K_X)

with the *uncentred* second-moment matrices ``K_Q = E[q qᵀ]`` and ``K_X = E[x xᵀ]`` (so the loss
needs only two ``d × d`` matrices, whatever the corpus size).

- **LeanVec-ID** (no query sample): queries follow the database, ``K_Q = K_X``; the minimiser is
  ``A = B =`` the top-D eigenvectors of ``K_X`` — PCA of the second moment, *without centring*
  (``pca`` centres, which serves reconstruction but shifts inner products by a per-vector term).
- **LeanVec-OOD** (``fit(X, queries=Q)`` or the ``queries=FILE.npy`` option): first the
  eigenvector search — ``A = B = P_β``, the top-D eigenvectors of
  ``β K_Q/‖K_Q‖ + (1-β) K_X/‖K_X‖``, β on a grid, the β of smallest loss kept — then block
  coordinate descent alternating ``A`` and ``B``, each block by Frank-Wolfe steps over the convex
  hull of the Stiefel manifold (the spectral-norm unit ball; its linear minimisation oracle is
  ``-U Vᵀ`` of the gradient's SVD) with exact line search (the loss is quadratic in each block).

Which matrix applies where: :meth:`transform` (documents, and everything that does not know about
queries) uses the database projection ``B``; :meth:`transform_query` uses ``A``. Code that embeds
queries calls ``transform_query`` (on every reducer: :class:`Reducer` maps it to ``transform``).
In the ID case ``A = B`` and both are the same. The FAISS / sentence-transformers / numpy exports
of :class:`~slimvec.reducers.linear.LinearReducer` carry ``B`` (the database side).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from slimvec.errors import ConfigError
from slimvec.reducers import decompose
from slimvec.reducers.base import as_float32_2d, check_finite, l2_normalize
from slimvec.reducers.linear import LinearReducer

__all__ = ["LeanVecReducer", "leanvec_loss"]

log = logging.getLogger(__name__)


def leanvec_loss(A: np.ndarray, B: np.ndarray, KQ: np.ndarray, KX: np.ndarray) -> float:
    """``tr((I - AᵀB)ᵀ K_Q (I - AᵀB) K_X)``: mean squared error of the reduced inner products."""
    M = np.eye(KQ.shape[0]) - A.T @ B
    return float(np.sum((KQ @ M) * (M @ KX)))


def _top_eigvecs(K: np.ndarray, D: int) -> np.ndarray:
    evals, evecs = decompose.eigh(K)
    P = evecs[:, np.argsort(evals)[::-1][:D]]
    signs = np.sign(P[np.abs(P).argmax(axis=0), np.arange(D)])
    signs[signs == 0] = 1.0
    return (P * signs).T  # (D, d)


def _lmo(G: np.ndarray) -> np.ndarray:
    """argmin over the spectral-norm ball of <G, S>: ``-U Vᵀ``."""
    U, _, Vt = decompose.svd(G, full_matrices=False)
    return -(U @ Vt)


def _fw_block(A: np.ndarray, B: np.ndarray, KQ: np.ndarray, KX: np.ndarray, which: str) -> np.ndarray:
    """One Frank-Wolfe step with exact line search on block ``which`` ("A" or "B")."""
    M = np.eye(KQ.shape[0]) - A.T @ B
    if which == "A":
        G = -2.0 * B @ KX @ M.T @ KQ
        S = _lmo(G)
        E = (S - A).T @ B  # M(γ) = M - γ E
    else:
        G = -2.0 * A @ KQ @ M @ KX
        S = _lmo(G)
        E = A.T @ (S - B)
    num = float(np.sum((KQ @ E) * (M @ KX)))
    den = float(np.sum((KQ @ E) * (E @ KX)))
    gamma = 0.0 if den <= 0 else min(max(num / den, 0.0), 1.0)
    cur = A if which == "A" else B
    return cur + gamma * (S - cur)


class LeanVecReducer(LinearReducer):
    """LeanVec linear reduction: inner products kept for reduced search + full rerank.

    Parameters
    ----------
    n_components : int, default 96
        Output dimension D.
    iters : int, default 20
        Frank-Wolfe block-coordinate rounds (OOD only; each updates A then B).
    betas : int, default 11
        Grid size of the eigenvector search over β in [0, 1] (OOD only).
    queries : str or None
        A ``.npy`` of query vectors (OOD fit); ``fit(X, queries=Q)`` takes an array instead.
    normalize : bool, default True
        L2-normalise the reduced vectors (what cosine stores expect).

    Fitted attributes
    -----------------
    components_ : ndarray (n_components_, n_features_in_)
        Database projection B (used by :meth:`transform`).
    query_components_ : ndarray (n_components_, n_features_in_)
        Query projection A (used by :meth:`transform_query`).
    offset_ : ndarray (n_features_in_,)
        Zeros (LeanVec does not centre).
    loss_ : float
        Fitted loss relative to ``tr(K_Q K_X)`` (0 = inner products kept exactly).
    beta_ : float or None
        β chosen by the eigenvector search (None for the ID fit).
    """

    name: ClassVar[str] = "leanvec"

    def __init__(self, n_components: int = 96, iters: int = 20, betas: int = 11,
                 queries: str | None = None, normalize: bool = True) -> None:
        self.n_components = n_components
        self.iters = iters
        self.betas = betas
        self.queries = queries
        self.normalize = normalize

    def fit(self, X: Any, y: Any = None, pairs: Any = None, queries: Any = None) -> LeanVecReducer:
        """Fit on database vectors ``X``; ``queries`` (or the ``queries`` option) selects LeanVec-OOD."""
        Q = queries
        if Q is None and self.queries:
            try:
                Q = np.load(self.queries, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"leanvec: cannot read the query sample {self.queries}: {exc}. "
                                  "Give a .npy of query vectors (n, dim).") from exc
        self._fit_queries = None
        if Q is not None:
            Q = as_float32_2d(Q, "leanvec queries")
            check_finite(Q, "leanvec queries")
            if Q.shape[0] == 0:
                raise ConfigError("leanvec: the query sample is empty.")
            self._fit_queries = Q
        try:
            return super().fit(X, y, pairs)
        finally:
            self._fit_queries = None

    def _fit_matrix(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        D = int(self.n_components)
        KX = X.T @ X / len(X)
        Q = getattr(self, "_fit_queries", None)
        if Q is None:  # LeanVec-ID: A = B = top eigenvectors of the second moment
            P = _top_eigvecs(KX, D)
            self.query_components_ = np.ascontiguousarray(P, dtype=np.float32)
            self.beta_ = None
            self.loss_ = leanvec_loss(P, P, KX, KX) / max(float(np.sum(KX * KX)), 1e-30)
            return P, np.zeros(X.shape[1])
        if Q.shape[1] != X.shape[1]:
            raise ConfigError(f"leanvec: queries have dimension {Q.shape[1]}, the database {X.shape[1]}.")
        Q = Q.astype(np.float64)
        KQ = Q.T @ Q / len(Q)
        nq, nx = np.linalg.norm(KQ), np.linalg.norm(KX)
        best = (np.inf, 0.0, None)
        for beta in np.linspace(0.0, 1.0, max(int(self.betas), 2)):
            P = _top_eigvecs(beta * KQ / nq + (1.0 - beta) * KX / nx, D)
            loss = leanvec_loss(P, P, KQ, KX)
            if loss < best[0]:
                best = (loss, float(beta), P)
        A = B = best[2]
        for _ in range(int(self.iters)):
            A = _fw_block(A, B, KQ, KX, "A")
            B = _fw_block(A, B, KQ, KX, "B")
        scale = max(float(np.sum(KQ * KX)), 1e-30)
        self.beta_ = best[1]
        self.loss_ = leanvec_loss(A, B, KQ, KX) / scale
        log.debug("leanvec: eigen-search beta=%.2f loss %.4g -> Frank-Wolfe loss %.4g",
                  best[1], best[0] / scale, self.loss_)
        self.query_components_ = np.ascontiguousarray(A, dtype=np.float32)
        return B, np.zeros(X.shape[1])

    def transform_query(self, X: Any) -> np.ndarray:
        """Reduce query vectors with the query projection A (float32, (n, n_components_))."""
        X = self._check_input(X, "query vectors")
        Z = (X - self.offset_) @ self.query_components_.T
        Z = l2_normalize(Z) if self.normalize else np.asarray(Z, dtype=np.float32)
        return np.ascontiguousarray(Z, dtype=np.float32)

    # ------------------------------------------------------------- persistence
    def _state(self) -> dict[str, np.ndarray]:
        state = super()._state()
        state["query_components_"] = self.query_components_
        return state

    def _meta(self) -> dict[str, Any]:
        meta = super()._meta()
        meta.update(loss_=float(self.loss_), beta_=self.beta_)
        return meta

    def _expected_shapes(self, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        shapes = super()._expected_shapes(meta)
        shapes["query_components_"] = shapes["components_"]
        return shapes
