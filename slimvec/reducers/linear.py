"""The linear family: every reducer here is ``y = (x - b) @ A.T`` (then optional renormalisation).

Subclasses only learn ``A`` (``components_``, shape (n_components, dim_in)) and ``b``
(``offset_``, shape (dim_in,)) in :meth:`LinearReducer._fit_matrix`; transform, inverse,
persistence and the exports (FAISS ``LinearTransform``, a sentence-transformers ``Dense`` layer,
plain numpy files) are shared.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from slimvec.reducers import decompose
from slimvec.reducers.base import Reducer

__all__ = ["LinearReducer", "PCAReducer"]


class LinearReducer(Reducer):
    """Base of reducers of the form ``y = (x - b) A^T``.

    Fitted attributes
    -----------------
    components_ : ndarray of shape (n_components_, n_features_in_)
    offset_ : ndarray of shape (n_features_in_,)
    """

    has_inverse: ClassVar[bool] = True

    def _fit(self, X: np.ndarray, **kwargs: Any) -> None:
        A, b = self._fit_matrix(X.astype(np.float64))
        self.components_ = np.ascontiguousarray(A, dtype=np.float32)
        self.offset_ = np.ascontiguousarray(b, dtype=np.float32)
        self.n_components_ = int(self.components_.shape[0])

    def _fit_matrix(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
        raise NotImplementedError

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return (X - self.offset_) @ self.components_.T

    def _inverse_transform(self, Z: np.ndarray) -> np.ndarray:
        pinv = np.linalg.pinv(self.components_.astype(np.float64))  # (dim_in, n_components)
        return (Z.astype(np.float64) @ pinv.T + self.offset_).astype(np.float32)

    # ------------------------------------------------------------- persistence
    def _state(self) -> dict[str, np.ndarray]:
        return {"components_": self.components_, "offset_": self.offset_}

    def _expected_shapes(self, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        d_in, d_out = int(meta.get("n_features_in_", -1)), int(meta.get("n_components_", -1))
        return {"components_": (d_out, d_in), "offset_": (d_in,)}

    # ----------------------------------------------------------------- exports
    def to_faiss(self):
        """Export as a FAISS ``VectorTransform`` computing the same vectors as :meth:`transform`.

        Returns a ``faiss.LinearTransform`` (``y = A x - A b``), chained with a
        ``NormalizationTransform`` when the reducer renormalises. Use it with
        ``faiss.IndexPreTransform(transform, index)`` in front of any FAISS index.
        """
        import faiss

        self._check_fitted()
        lt = faiss.LinearTransform(self.n_features_in_, self.n_components_, True)
        faiss.copy_array_to_vector(self.components_.ravel().astype(np.float32), lt.A)
        bias = -(self.components_.astype(np.float64) @ self.offset_.astype(np.float64))
        faiss.copy_array_to_vector(bias.astype(np.float32), lt.b)
        lt.is_trained = True
        if not getattr(self, "normalize", False):
            return lt
        norm = faiss.NormalizationTransform(self.n_components_, 2.0)
        return _Chain(lt, norm)

    def to_sentence_transformers(self, model: Any, *, copy: bool = True) -> Any:
        """Append this reducer to a sentence-transformers model (Dense with bias + Normalize).

        ``result.encode(x)`` equals ``self.transform(model.encode(x))`` up to float32 rounding.
        See :func:`slimvec.reducers.exports.to_sentence_transformers`.
        """
        from slimvec.reducers.exports import to_sentence_transformers

        return to_sentence_transformers(self, model, copy=copy)

    def export_numpy(self, folder: str | os.PathLike[str]) -> Path:
        """Write ``components.npy``, ``offset.npy`` and ``linear.json`` (no pickle).

        ``y = normalize((x - offset) @ components.T)``; see
        :func:`slimvec.reducers.exports.export_numpy`.
        """
        from slimvec.reducers.exports import export_numpy

        return export_numpy(self, folder)


class _Chain:
    """Two FAISS transforms applied in order; ``.transforms`` for ``IndexPreTransform`` chains."""

    def __init__(self, *transforms: Any) -> None:
        self.transforms = transforms
        self.d_in = transforms[0].d_in
        self.d_out = transforms[-1].d_out

    def apply(self, x: np.ndarray) -> np.ndarray:
        for t in self.transforms:
            x = t.apply(np.ascontiguousarray(x, dtype=np.float32))
        return x

    def wrap(self, index: Any) -> Any:
        """Return ``IndexPreTransform`` applying the chain in front of ``index``."""
        import faiss

        pre = faiss.IndexPreTransform(index)
        for t in reversed(self.transforms):
            pre.prepend_transform(t)
        pre._slimvec_keep = self.transforms  # keep the SWIG objects alive
        return pre


class PCAReducer(LinearReducer):
    """Mean-centred PCA.

    Parameters
    ----------
    n_components : int, default 96
        Output dimension D.
    whiten : bool, default False
        Scale each component by ``1 / sqrt(explained variance)``.
    normalize : bool, default True
        L2-normalise the reduced vectors (what cosine stores expect).
    center : bool, default True
        Subtract the mean before projecting. ``center=false`` (with ``normalize=false``) makes
        ``y = A x`` with ``A`` the top eigenvectors of the uncentred second moment ``XᵀX / n``:
        the reduced inner product ``<A q, A x>`` is then the inner product of ``x``'s projection,
        what an inner-product index needs (:mod:`slimvec.buildspec`).

    Fitted attributes
    -----------------
    components_, offset_ : see :class:`LinearReducer` (``offset_`` is the mean, zero when not
        ``center``).
    explained_variance_ : ndarray of shape (n_components_,)
    """

    name: ClassVar[str] = "pca"

    def __init__(self, n_components: int = 96, whiten: bool = False, normalize: bool = True,
                 center: bool = True) -> None:
        self.n_components = n_components
        self.whiten = whiten
        self.normalize = normalize
        self.center = center

    def _fit_matrix(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean = X.mean(axis=0) if getattr(self, "center", True) else np.zeros(X.shape[1])
        Xc = X - mean
        # eigh of the (d x d) covariance: O(n d^2), fast for any n at sentence-embedding d.
        cov = Xc.T @ Xc / max(X.shape[0] - 1, 1)
        evals, evecs = decompose.eigh(cov)
        order = np.argsort(evals)[::-1][: self.n_components]
        evals, evecs = np.clip(evals[order], 0.0, None), evecs[:, order]
        # deterministic sign: largest-magnitude loading of each component is positive
        signs = np.sign(evecs[np.abs(evecs).argmax(axis=0), np.arange(evecs.shape[1])])
        signs[signs == 0] = 1.0
        A = (evecs * signs).T
        self.explained_variance_ = evals.astype(np.float32)
        if self.whiten:
            A = A / np.sqrt(np.maximum(evals, 1e-12))[:, None]
        return A, mean

    def _state(self) -> dict[str, np.ndarray]:
        state = super()._state()
        state["explained_variance_"] = self.explained_variance_
        return state

    def _expected_shapes(self, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        shapes = super()._expected_shapes(meta)
        shapes["explained_variance_"] = (int(meta.get("n_components_", -1)),)
        return shapes
