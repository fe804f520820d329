"""The rest of the linear family: ``whiten``, ``svd``, ``rp``, ``truncate`` and ``algo``.

Each only learns ``A`` and ``b`` of ``y = (x - b) A^T`` (see :class:`LinearReducer`), so
transform, inverse, persistence and the FAISS / sentence-transformers / numpy exports are shared.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from slimvec.errors import ConfigError
from slimvec.reducers import decompose
from slimvec.reducers.linear import LinearReducer, PCAReducer

__all__ = [
    "WhitenReducer",
    "SVDReducer",
    "RandomProjectionReducer",
    "TruncateReducer",
    "AlgoReducer",
    "top_eigenvectors",
]


def _fix_signs(V: np.ndarray) -> np.ndarray:
    """Flip columns so each one's largest-magnitude entry is positive (deterministic output)."""
    idx = np.abs(V).argmax(axis=0)
    signs = np.sign(V[idx, np.arange(V.shape[1])])
    signs[signs == 0] = 1.0
    return V * signs


def top_eigenvectors(S: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Largest ``n`` eigenpairs of a symmetric matrix, descending, with deterministic signs.

    Returns
    -------
    evals : ndarray of shape (n,)
        Clipped at 0 (covariances are positive semi-definite up to rounding).
    evecs : ndarray of shape (dim, n)
        Orthonormal columns.
    """
    evals, evecs = decompose.eigh(S)
    order = np.argsort(evals)[::-1][:n]
    return np.clip(evals[order], 0.0, None), _fix_signs(evecs[:, order])


def _cov(X: np.ndarray) -> np.ndarray:
    return X.T @ X / max(X.shape[0] - 1, 1)


class WhitenReducer(PCAReducer):
    """PCA whitening (BERT-whitening, Su et al. 2021): ``y = (x - mean) U diag(1/sqrt(lambda))``.

    The same map as ``pca:D,whiten=true``, under its own name because users look for it.

    Parameters
    ----------
    n_components : int, default 96
        Output dimension D.
    normalize : bool, default True
        L2-normalise the reduced vectors.

    Fitted attributes
    -----------------
    components_, offset_, explained_variance_ : see :class:`PCAReducer`.
    """

    name: ClassVar[str] = "whiten"
    #: fixed, not a parameter: read by :meth:`PCAReducer._fit_matrix`
    whiten: ClassVar[bool] = True  # type: ignore[misc]

    def __init__(self, n_components: int = 96, normalize: bool = True) -> None:
        self.n_components = n_components
        self.normalize = normalize


class SVDReducer(LinearReducer):
    """Truncated SVD, not centred (``sklearn.decomposition.TruncatedSVD`` on dense input).

    ``A`` holds the top right singular vectors of ``X`` and ``b = 0``, so the first component
    mostly carries the common mean direction of the embeddings.

    Parameters
    ----------
    n_components : int, default 96
        Output dimension D.
    normalize : bool, default True
        L2-normalise the reduced vectors.

    Fitted attributes
    -----------------
    components_ : ndarray of shape (n_components_, n_features_in_)
    offset_ : ndarray of zeros, shape (n_features_in_,)
    singular_values_ : ndarray of shape (n_components_,)
    """

    name: ClassVar[str] = "svd"

    def __init__(self, n_components: int = 96, normalize: bool = True) -> None:
        self.n_components = n_components
        self.normalize = normalize

    def _fit_matrix(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        evals, evecs = top_eigenvectors(X.T @ X, self.n_components)
        self.singular_values_ = np.sqrt(evals).astype(np.float32)
        return evecs.T, np.zeros(X.shape[1])

    def _inverse_transform(self, Z: np.ndarray) -> np.ndarray:
        return Z @ self.components_  # orthonormal rows: the pseudo-inverse is the transpose

    def _state(self) -> dict[str, np.ndarray]:
        return {**super()._state(), "singular_values_": self.singular_values_}

    def _expected_shapes(self, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        shapes = super()._expected_shapes(meta)
        shapes["singular_values_"] = (int(meta.get("n_components_", -1)),)
        return shapes


class RandomProjectionReducer(LinearReducer):
    """Gaussian random projection: ``A`` has i.i.d. ``N(0, 1/D)`` entries, ``b = 0``.

    Data-independent (``fit`` only reads the input dimension), so any number of fit rows works.
    The same ``seed`` always gives the same matrix.

    Parameters
    ----------
    n_components : int, default 96
        Output dimension D.
    seed : int, default 0
        Seed of the random matrix.
    normalize : bool, default True
        L2-normalise the reduced vectors.
    """

    name: ClassVar[str] = "rp"
    has_inverse: ClassVar[bool] = False

    def __init__(self, n_components: int = 96, seed: int = 0, normalize: bool = True) -> None:
        self.n_components = n_components
        self.seed = seed
        self.normalize = normalize

    def _needs_samples_ge_components(self) -> bool:
        return False

    def _fit_matrix(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        A = rng.normal(0.0, 1.0 / np.sqrt(self.n_components), (self.n_components, X.shape[1]))
        return A, np.zeros(X.shape[1])


class TruncateReducer(LinearReducer):
    """Keep the first D coordinates (the Matryoshka way), renormalised.

    Only sensible for encoders trained with a Matryoshka loss (their leading coordinates carry the
    most information); for other encoders it is the do-nothing baseline. ``inverse_transform``
    pads with zeros.

    Parameters
    ----------
    n_components : int, default 96
        Output dimension D.
    normalize : bool, default True
        L2-normalise the truncated vectors.
    """

    name: ClassVar[str] = "truncate"

    def __init__(self, n_components: int = 96, normalize: bool = True) -> None:
        self.n_components = n_components
        self.normalize = normalize

    def _needs_samples_ge_components(self) -> bool:
        return False

    def _fit_matrix(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.eye(self.n_components, X.shape[1]), np.zeros(X.shape[1])

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return X[:, : self.n_components_].copy()

    def _inverse_transform(self, Z: np.ndarray) -> np.ndarray:
        out = np.zeros((Z.shape[0], self.n_features_in_), dtype=np.float32)
        out[:, : self.n_components_] = Z
        return out


class AlgoReducer(LinearReducer):
    """"Algo" of Raunak, Gupta & Metze (2019): post-processing + PCA + post-processing.

    1. PPA: subtract the mean, remove the projections on the top ``k`` principal directions.
    2. PCA of the result to ``D + k`` dimensions.
    3. PPA again: subtract the per-dimension mean and remove the top ``k`` directions.

    The reference code's last step zeroes the first ``k`` of ``D`` output columns (leaving
    ``D - k`` informative ones); here step 2 keeps ``D + k`` and step 3 drops the ``k`` removed
    directions, so all ``D`` outputs are informative. Every step is affine, so the whole map is
    stored as ``A`` and ``b`` and applied to new vectors out of sample. ``k = 7`` is the paper's
    value, tuned for 300-d GloVe; it needs ``D + 2k <= dim``. ``inverse_transform`` (the
    pseudo-inverse) is approximate: the removed directions cannot come back.

    Parameters
    ----------
    n_components : int, default 96
        Output dimension D.
    k : int, default 7
        Dominating directions removed by each post-processing step.
    normalize : bool, default True
        L2-normalise the reduced vectors.
    """

    name: ClassVar[str] = "algo"

    def __init__(self, n_components: int = 96, k: int = 7, normalize: bool = True) -> None:
        self.n_components = n_components
        self.k = k
        self.normalize = normalize

    def _fit_matrix(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d, D, k = X.shape[1], self.n_components, self.k
        if not isinstance(k, (int, np.integer)) or k < 0:
            raise ConfigError(f"algo: k must be a non-negative integer, got {k!r}.")
        if D + 2 * k > d:
            raise ConfigError(
                f"algo: n_components={D} plus 2*k={2 * k} removed directions is larger than the "
                f"input dimension {d}. Lower n_components or k."
            )
        # 1. PPA on the input
        mu = X.mean(axis=0)
        Xc = X - mu
        _, U = top_eigenvectors(_cov(Xc), k)
        P = np.eye(d) - U @ U.T
        X2 = Xc @ P
        # 2. PCA to D + k
        mean2 = X2.mean(axis=0)
        _, V = top_eigenvectors(_cov(X2 - mean2), D + k)
        Z = (X2 - mean2) @ V
        # 3. PPA on the reduced vectors; keep the D directions left after removing the top k
        mean3 = Z.mean(axis=0)
        _, W = top_eigenvectors(_cov(Z - mean3), D + k)
        Q = W[:, k:]
        # y = ((x - mu) P - mean2) V Q - mean3 Q  =  (x - b) A^T
        A = (P @ V @ Q).T
        const = -(mean2 @ V @ Q + mean3 @ Q)
        b = mu - const @ np.linalg.pinv(A.T)
        return A, b
