"""``kpca:D`` — kernel PCA (Schölkopf et al. 1998), inductive.

Fitted on at most ``fit_max`` points; new vectors are projected with the kernel against those
points (the out-of-sample formula), so the artifact stores the fit points themselves.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from slimvec.errors import ConfigError
from slimvec.reducers.base import Reducer

__all__ = ["KernelPCAReducer", "KERNELS"]

log = logging.getLogger(__name__)

KERNELS = ("rbf", "poly", "cosine")
_BATCH = 4096


class KernelPCAReducer(Reducer):
    """Kernel PCA with an out-of-sample transform.

    ``fit`` keeps ``m = min(n, fit_max)`` rows (a seeded random sample when ``n > fit_max``),
    centres their kernel matrix in feature space and keeps its top ``D`` eigenvectors as dual
    coefficients ``alpha = V / sqrt(lambda)``. A new vector ``x`` maps to
    ``centred(k(x, X_fit)) @ alpha``.

    **The artifact grows with** ``fit_max``: it stores the ``m x dim`` fit points plus the
    ``m x D`` dual coefficients in float32, i.e. ``4 * m * (dim + D + 1)`` bytes (about 9.6 MB at
    ``fit_max=5000``, dim 384, D 96), and transform costs ``O(m * dim)`` per vector. Fit costs a
    ``m x m`` kernel matrix and its eigendecomposition (``O(m^2)`` memory, ``O(m^3)`` time).

    Parameters
    ----------
    n_components : int, default 96
        Output dimension D.
    kernel : {"rbf", "poly", "cosine"}, default "rbf"
        ``rbf``: ``exp(-gamma ||x - y||^2)``; ``poly``: ``(gamma <x, y> + coef0) ** degree``;
        ``cosine``: ``<x, y> / (||x|| ||y||)``.
    gamma : float, optional
        Kernel scale. Default: for ``rbf`` the inverse median squared distance between fit
        points (the median heuristic); for ``poly`` 1.0 (unit-norm sentence vectors). The value
        used is ``gamma_``.
    degree : int, default 3
        Degree of the ``poly`` kernel.
    coef0 : float, default 1.0
        Constant of the ``poly`` kernel.
    fit_max : int, default 5000
        Most points kept for the fit (and in the artifact).
    seed : int, default 0
        Seed of the fit-point sample.
    normalize : bool, default True
        L2-normalise the reduced vectors.

    Fitted attributes
    -----------------
    X_fit_ : ndarray of shape (m, n_features_in_)
    dual_coef_ : ndarray of shape (m, n_components_)
    K_fit_rows_ : ndarray of shape (m,)
        Column means of the uncentred fit kernel matrix.
    K_fit_all_ : float
        Mean of the uncentred fit kernel matrix.
    eigenvalues_ : ndarray of shape (n_components_,)
    gamma_ : float
    """

    name: ClassVar[str] = "kpca"

    def __init__(
        self,
        n_components: int = 96,
        kernel: str = "rbf",
        gamma: float | None = None,
        degree: int = 3,
        coef0: float = 1.0,
        fit_max: int = 5000,
        seed: int = 0,
        normalize: bool = True,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.fit_max = fit_max
        self.seed = seed
        self.normalize = normalize

    # ------------------------------------------------------------------ kernel
    def _kernel(self, X: np.ndarray, Y: np.ndarray, gamma: float) -> np.ndarray:
        if self.kernel == "rbf":
            sq = (X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :] - 2.0 * (X @ Y.T)
            return np.exp(-gamma * np.maximum(sq, 0.0))
        if self.kernel == "poly":
            return (gamma * (X @ Y.T) + self.coef0) ** self.degree
        nx = np.linalg.norm(X, axis=1, keepdims=True)
        ny = np.linalg.norm(Y, axis=1, keepdims=True)
        return (X / np.where(nx > 0, nx, 1.0)) @ (Y / np.where(ny > 0, ny, 1.0)).T

    def _default_gamma(self, X: np.ndarray) -> float:
        if self.gamma is not None:
            return float(self.gamma)
        if self.kernel != "rbf":
            return 1.0
        sub = X[: min(len(X), 2000)]
        sq = (sub * sub).sum(1)[:, None] + (sub * sub).sum(1)[None, :] - 2.0 * (sub @ sub.T)
        off = sq[np.triu_indices(len(sub), 1)]
        med = float(np.median(off)) if off.size else 0.0
        return 1.0 / med if med > 1e-12 else 1.0

    def _validate(self) -> None:
        if self.kernel not in KERNELS:
            raise ConfigError(f"kpca: unknown kernel {self.kernel!r}. Known: {', '.join(KERNELS)}.")
        if self.gamma is not None and not (isinstance(self.gamma, (int, float)) and self.gamma > 0):
            raise ConfigError(f"kpca: gamma must be a positive number, got {self.gamma!r}.")
        if not isinstance(self.fit_max, (int, np.integer)) or self.fit_max < self.n_components:
            raise ConfigError(
                f"kpca: fit_max={self.fit_max!r} must be an integer >= n_components="
                f"{self.n_components} (kernel PCA has at most as many components as fit points)."
            )

    # ---------------------------------------------------------------- fitting
    def _fit(self, X: np.ndarray, **kwargs: Any) -> None:
        from scipy.linalg import eigh

        self._validate()
        if len(X) > self.fit_max:
            rng = np.random.default_rng(self.seed)
            X = X[np.sort(rng.choice(len(X), self.fit_max, replace=False))]
            log.info("kpca: fitting on a random sample of %d of the vectors", self.fit_max)
        X64 = X.astype(np.float64)
        gamma = self._default_gamma(X64)
        K = self._kernel(X64, X64, gamma)
        rows = K.mean(axis=0)
        total = float(rows.mean())
        Kc = K - rows[None, :] - rows[:, None] + total
        m, D = len(X), self.n_components
        evals, evecs = eigh(Kc, subset_by_index=[m - D, m - 1])
        order = np.argsort(evals)[::-1]
        evals, evecs = evals[order], evecs[:, order]
        idx = np.abs(evecs).argmax(axis=0)
        signs = np.sign(evecs[idx, np.arange(D)])
        signs[signs == 0] = 1.0
        evecs = evecs * signs
        # zero-variance components (rank-deficient kernels) project to 0 instead of blowing up
        keep = evals > 1e-10 * max(float(evals.max(initial=0.0)), 1e-300)
        alpha = np.where(keep, evecs / np.sqrt(np.where(keep, evals, 1.0)), 0.0)
        self.X_fit_ = np.ascontiguousarray(X, dtype=np.float32)
        self.dual_coef_ = np.ascontiguousarray(alpha, dtype=np.float32)
        self.K_fit_rows_ = rows.astype(np.float32)
        self.K_fit_all_ = total
        self.eigenvalues_ = np.clip(evals, 0.0, None).astype(np.float32)
        self.gamma_ = gamma
        self.n_components_ = D

    def _transform(self, X: np.ndarray) -> np.ndarray:
        out = np.empty((len(X), self.n_components_), dtype=np.float32)
        for start in range(0, len(X), _BATCH):
            xb = X[start : start + _BATCH]
            K = self._kernel(xb, self.X_fit_, float(np.float32(self.gamma_))).astype(np.float32)
            # centre in feature space (sklearn's KernelCenterer.transform)
            K -= K.mean(axis=1, keepdims=True) - np.float32(self.K_fit_all_)
            K -= self.K_fit_rows_[None, :]
            out[start : start + _BATCH] = K @ self.dual_coef_
        return out

    # ------------------------------------------------------------ persistence
    def _state(self) -> dict[str, np.ndarray]:
        return {
            "X_fit_": self.X_fit_,
            "dual_coef_": self.dual_coef_,
            "K_fit_rows_": self.K_fit_rows_,
            "eigenvalues_": self.eigenvalues_,
        }

    def _meta(self) -> dict[str, Any]:
        return {
            "n_components_": int(self.n_components_),
            "K_fit_all_": float(self.K_fit_all_),
            "gamma_": float(self.gamma_),
            "n_fit_": int(len(self.X_fit_)),
        }

    def _restore(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        meta = {k: v for k, v in meta.items() if k != "n_fit_"}
        super()._restore(meta, arrays)

    def _expected_shapes(self, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        m = int(meta.get("n_fit_", -1))
        d_in, d_out = int(meta.get("n_features_in_", -1)), int(meta.get("n_components_", -1))
        return {
            "X_fit_": (m, d_in),
            "dual_coef_": (m, d_out),
            "K_fit_rows_": (m,),
            "eigenvalues_": (d_out,),
        }
