"""Locality-preserving reducers: ``lle:D,neighbors=k`` and ``npe:D,neighbors=k``.

SBERT-LP (locally linear embedding of the sentence space): each sentence is reconstructed from its
k nearest neighbours with weights ``w = G^-1 1 / 1^T G^-1 1`` (``G`` the regularised local Gram
matrix), and the embedding keeps those weights: the bottom eigenvectors of
``M = (I - W)^T (I - W)`` without the constant one.

- :class:`LLEReducer` is that, with scikit-learn's ``LocallyLinearEmbedding`` fitted on a
  subsample and the barycentric map for new points (reimplemented here so the artifact is
  safetensors only).
- :class:`NPEReducer` is its linear version, neighbourhood preserving embedding: solve
  ``X^T M X a = lambda X^T X a`` for the smallest ``lambda`` and map ``y = (x - mean) A^T``, so it
  reduces millions of new points with one matrix product and joins the linear family's exports.

k-NN graphs come from FAISS (:mod:`slimvec.reducers._knn`), never an N x N distance matrix.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from slimvec.errors import ConfigError
from slimvec.reducers import decompose
from slimvec.reducers._knn import knn_graph, knn_query
from slimvec.reducers.base import Reducer
from slimvec.reducers.linear import LinearReducer

__all__ = ["LLEReducer", "NPEReducer", "barycentric_weights", "subsample"]

log = logging.getLogger(__name__)

_CHUNK = 2048


def barycentric_weights(
    X: np.ndarray, points: np.ndarray, neighbors: np.ndarray, reg: float = 1e-3
) -> np.ndarray:
    """Weights reconstructing each row of ``X`` from its neighbours among ``points``.

    For row ``x`` with neighbours ``N`` (k x d): ``G = (N - x)(N - x)^T``, regularised by
    ``reg * trace(G)`` on the diagonal (``reg`` when the trace is 0), ``w = G^-1 1`` scaled to sum
    to 1. Same as scikit-learn's ``barycenter_weights``, batched.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    points : ndarray of shape (m, d)
    neighbors : int ndarray of shape (n, k)
        Row indices into ``points``.
    reg : float

    Returns
    -------
    ndarray of shape (n, k), float64, rows summing to 1.
    """
    n, k = neighbors.shape
    out = np.empty((n, k), dtype=np.float64)
    ones = np.ones((k, 1))
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        C = points[neighbors[start:stop]].astype(np.float64) - X[start:stop, None, :].astype(np.float64)
        G = C @ C.transpose(0, 2, 1)  # (b, k, k)
        trace = np.trace(G, axis1=1, axis2=2)
        R = np.where(trace > 0, reg * trace, reg)
        G[:, np.arange(k), np.arange(k)] += R[:, None]
        w = np.linalg.solve(G, np.broadcast_to(ones, (stop - start, k, 1)))[..., 0]
        out[start:stop] = w / w.sum(axis=1, keepdims=True)
    return out


def subsample(n: int, fit_max: int | None, seed: int | None) -> np.ndarray | None:
    """Sorted row indices of a seeded subsample of ``fit_max`` rows, or ``None`` to keep all."""
    if fit_max is None or n <= fit_max:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, size=int(fit_max), replace=False))


def _check_neighbors(name: str, neighbors: Any, n: int) -> int:
    if not isinstance(neighbors, (int, np.integer)) or neighbors < 1:
        raise ConfigError(f"{name}: neighbors must be a positive integer, got {neighbors!r}.")
    if n < neighbors + 1:
        raise ConfigError(
            f"{name}: {neighbors} neighbours need at least {neighbors + 1} fit vectors, got {n}."
        )
    return int(neighbors)


class LLEReducer(Reducer):
    """Locally linear embedding (SBERT-LP) with a barycentric map for new points.

    Fitting runs scikit-learn's ``LocallyLinearEmbedding`` (standard method) on at most
    ``fit_max`` rows with an explicit ``eigen_solver`` (default ``'arpack'``: sparse shift-invert,
    bounded memory; sklearn's ``'auto'`` switches to a dense N x N solve once D >= 9). A new point
    is mapped like sklearn's ``transform``: its ``neighbors`` nearest fit points (exact FAISS
    search), barycentric weights, and the weighted sum of their embeddings. The float64, tiny-scale
    output is cast to float32 and L2-normalised (``normalize=True``).

    The artifact stores the fit points and their embedding (``fit_points_``, ``embedding_``), so
    its size grows with ``fit_max`` (10,000 x 384 float32 = 15 MB), and transform costs a k-NN
    search over them.

    Parameters
    ----------
    n_components : int, default 64
    neighbors : int, default 10
    fit_max : int, default 10000
    reg : float, default 1e-3
        Regularisation of the local Gram matrices.
    eigen_solver : {'arpack', 'dense'}, default 'arpack'
    seed : int, default 0
        Subsample and ARPACK start vector.
    normalize : bool, default True
    """

    name: ClassVar[str] = "lle"

    def __init__(
        self,
        n_components: int = 64,
        neighbors: int = 10,
        fit_max: int = 10000,
        reg: float = 1e-3,
        eigen_solver: str = "arpack",
        seed: int = 0,
        normalize: bool = True,
    ) -> None:
        self.n_components = n_components
        self.neighbors = neighbors
        self.fit_max = fit_max
        self.reg = reg
        self.eigen_solver = eigen_solver
        self.seed = seed
        self.normalize = normalize

    def _fit(self, X: np.ndarray, **kwargs: Any) -> None:
        from sklearn.manifold import LocallyLinearEmbedding

        if self.eigen_solver not in ("arpack", "dense"):
            raise ConfigError(
                f"lle: eigen_solver must be 'arpack' or 'dense', got {self.eigen_solver!r} "
                "('auto' may pick a dense N x N solve)."
            )
        keep = subsample(X.shape[0], self.fit_max, self.seed)
        pts = X if keep is None else X[keep]
        k = _check_neighbors("lle", self.neighbors, pts.shape[0])
        if self.n_components >= pts.shape[0]:
            raise ConfigError(
                f"lle: n_components={self.n_components} needs more than that many fit vectors, "
                f"got {pts.shape[0]}."
            )
        lle = LocallyLinearEmbedding(
            n_neighbors=k,
            n_components=int(self.n_components),
            reg=self.reg,
            eigen_solver=self.eigen_solver,
            method="standard",
            random_state=self.seed,
            n_jobs=1,
        )
        emb = lle.fit_transform(pts.astype(np.float64))
        self.fit_points_ = np.ascontiguousarray(pts, dtype=np.float32)
        self.embedding_ = np.ascontiguousarray(emb, dtype=np.float32)
        self.reconstruction_error_ = float(lle.reconstruction_error_)
        self.n_components_ = int(self.n_components)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        _, ind = knn_query(self.fit_points_, X, int(self.neighbors), exact=True)
        W = barycentric_weights(X, self.fit_points_, ind, self.reg)
        return np.einsum("nk,nkd->nd", W, self.embedding_[ind].astype(np.float64))

    def _state(self) -> dict[str, np.ndarray]:
        return {"fit_points_": self.fit_points_, "embedding_": self.embedding_}

    def _meta(self) -> dict[str, Any]:
        return {
            "n_components_": int(self.n_components_),
            "n_fit_": int(self.fit_points_.shape[0]),
            "reconstruction_error_": float(self.reconstruction_error_),
        }

    def _expected_shapes(self, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        n_fit, d_in = int(meta.get("n_fit_", -1)), int(meta.get("n_features_in_", -1))
        return {"fit_points_": (n_fit, d_in), "embedding_": (n_fit, int(meta.get("n_components_", -1)))}


class NPEReducer(LinearReducer):
    """Neighbourhood preserving embedding: the linear version of LLE.

    1. k-NN graph of the fit rows (FAISS), barycentric weights ``W`` (rows sum to 1);
    2. ``E = (I - W) Xc`` with ``Xc`` the centred rows, never forming ``M`` or an N x N matrix;
    3. restrict to the principal subspace of ``Xc`` (directions with variance above ``tol`` times
       the largest; sentence encoders have near-constant coordinates that would otherwise give
       the trivial ``lambda = 0`` solution), add ``ridge`` times the mean variance to ``Xc^T Xc``,
       and solve ``Xc^T M Xc a = lambda (Xc^T Xc + ridge) a`` for the ``D`` smallest ``lambda``.

    ``y = (x - mean) A^T`` with ``A`` the eigenvectors (rows), scaled so each output has unit
    variance on the fit rows; then L2-normalised (``normalize=True``).

    Parameters
    ----------
    n_components : int, default 64
    neighbors : int, default 10
    reg : float, default 1e-3
        Regularisation of the local Gram matrices.
    ridge : float, default 1e-3
    tol : float, default 1e-6
    fit_max : int or None, default 50000
        Rows used for the fit (seeded subsample).
    seed : int, default 0
    normalize : bool, default True

    Fitted attributes
    -----------------
    components_, offset_ : see :class:`LinearReducer`.
    eigenvalues_ : ndarray of shape (n_components_,)
        The ``lambda`` of each component, ascending.
    """

    name: ClassVar[str] = "npe"

    def __init__(
        self,
        n_components: int = 64,
        neighbors: int = 10,
        reg: float = 1e-3,
        ridge: float = 1e-3,
        tol: float = 1e-6,
        fit_max: int | None = 50000,
        seed: int = 0,
        normalize: bool = True,
    ) -> None:
        self.n_components = n_components
        self.neighbors = neighbors
        self.reg = reg
        self.ridge = ridge
        self.tol = tol
        self.fit_max = fit_max
        self.seed = seed
        self.normalize = normalize

    def _fit_matrix(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from scipy.linalg import eigh

        keep = subsample(X.shape[0], self.fit_max, self.seed)
        if keep is not None:
            X = X[keep]
        n, d = X.shape
        k = _check_neighbors("npe", self.neighbors, n)
        mean = X.mean(axis=0)
        Xc = X - mean
        ind = knn_graph(X.astype(np.float32), k)
        W = barycentric_weights(X, X, ind, self.reg)
        E = Xc - np.einsum("nk,nkd->nd", W, Xc[ind])
        # principal subspace of the fit rows
        evals, evecs = decompose.eigh(Xc.T @ Xc)
        basis = evecs[:, evals > self.tol * max(evals.max(), 1e-300)]
        if basis.shape[1] < self.n_components:
            raise ConfigError(
                f"npe: the fit vectors span only {basis.shape[1]} dimensions, fewer than "
                f"n_components={self.n_components}. Fit on more (and more varied) vectors."
            )
        EV, XV = E @ basis, Xc @ basis
        A_m = EV.T @ EV
        B = XV.T @ XV
        B[np.diag_indices_from(B)] += self.ridge * np.trace(B) / B.shape[0]
        lam, vecs = eigh(A_m, B, subset_by_index=[0, self.n_components - 1])
        A = (basis @ vecs).T  # (D, d)
        # unit variance per output on the fit rows, and a deterministic sign
        A /= np.maximum((Xc @ A.T).std(axis=0), 1e-12)[:, None]
        signs = np.sign(A[np.arange(A.shape[0]), np.abs(A).argmax(axis=1)])
        signs[signs == 0] = 1.0
        self.eigenvalues_ = lam.astype(np.float32)
        return A * signs[:, None], mean

    def _state(self) -> dict[str, np.ndarray]:
        state = super()._state()
        state["eigenvalues_"] = self.eigenvalues_
        return state

    def _expected_shapes(self, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        shapes = super()._expected_shapes(meta)
        shapes["eigenvalues_"] = (int(meta.get("n_components_", -1)),)
        return shapes
