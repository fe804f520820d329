"""The reducer contract: a scikit-learn transformer with safe persistence and a spec string.

Subclasses set :attr:`Reducer.name` (the registry key), store hyper-parameters verbatim in
``__init__``, learn state into attributes ending in ``_`` in ``_fit``, and implement
``_transform``. Persistence is shared: ``_state()`` returns the fitted arrays (saved to
safetensors) and ``_meta()`` the fitted JSON scalars; ``_restore()`` puts them back.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import NotFittedError

from slimvec.errors import ConfigError, DimensionMismatchError, PersistenceError
from slimvec.persistence import load_artifact, save_artifact
from slimvec.specs import format_spec

__all__ = ["Reducer", "check_finite", "as_float32_2d", "l2_normalize"]

ARTIFACT_KIND = "slimvec-reducer"
_TINY = np.float32(np.finfo(np.float32).tiny)


def l2_normalize(Z: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation in float32; zero rows stay zero.

    Three numpy calls (einsum, sqrt, divide by the norm floored at the smallest normal float32):
    it runs on every query, where ``np.linalg.norm`` with a masked divide cost about twice as
    much. A zero row divides 0 by the floor, so it stays zero.
    """
    Z = np.asarray(Z, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    return Z / np.maximum(norms, _TINY)[:, None]


def as_float32_2d(X: Any, what: str = "X") -> np.ndarray:
    """Return ``X`` as a C-contiguous float32 2-D array (a 1-D vector becomes one row)."""
    if hasattr(X, "toarray") and hasattr(X, "nnz"):  # scipy.sparse, without importing scipy
        raise ConfigError(
            f"{what}: sparse input is not supported; pass dense vectors (X.toarray())."
        )
    dtype = getattr(X, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind == "c":
        raise ConfigError(f"Complex data not supported in {what}; pass real-valued vectors.")
    try:
        arr = np.asarray(X, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} must be numeric vectors: {exc}.") from exc
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ConfigError(f"{what} must be 2-D (n_samples, dim), got shape {arr.shape}.")
    return np.ascontiguousarray(arr)


def check_finite(X: np.ndarray, what: str = "X") -> None:
    """Raise :class:`ConfigError` with the count and first row of non-finite rows."""
    if X.size <= 4096:  # a few queries: one test per value costs less than errstate's context
        if np.isfinite(X).all():
            return
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            if np.isfinite(np.einsum("ij->", X)):  # one pass: a NaN or inf makes the sum non-finite
                return
    bad = ~np.isfinite(X).all(axis=1)  # (or finite values overflowed the sum: look row by row)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise ConfigError(
            f"{what} has {rows.size} row(s) with NaN or inf values (first at row {rows[0]}). "
            "Remove or repair those rows before reducing."
        )


class Reducer(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):  # type: ignore[call-arg]  # sklearn's _SetOutputMixin takes it: no output wrapper on the query path
    """Base class of every slimvec reducer.

    Class attributes
    ----------------
    name : str
        Registry key used in spec strings (``pca`` in ``pca:96``).
    has_inverse : bool
        Whether :meth:`inverse_transform` is available.
    learns_from_pairs : bool
        Whether ``fit`` uses the ``pairs`` argument (index pairs of similar rows of ``X``).
    has_clusters : bool
        Whether the reducer implements ``predict_cluster``.
    """

    name: ClassVar[str] = ""
    has_inverse: ClassVar[bool] = False
    learns_from_pairs: ClassVar[bool] = False
    has_clusters: ClassVar[bool] = False
    #: first positional spec argument maps to this __init__ parameter
    spec_arg: ClassVar[str | None] = "n_components"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # no output wrapper on a subclass's own transform either (sklearn wraps every class
        # that defines one unless told not to): ~3 us of every query
        super().__init_subclass__(auto_wrap_output_keys=None, **kwargs)

    def __sklearn_tags__(self) -> Any:
        """Declare float32 output: every reducer returns float32 whatever the input dtype."""
        tags = super().__sklearn_tags__()
        if tags.transformer_tags is not None:
            tags.transformer_tags.preserves_dtype = ["float32"]
        return tags

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any = None, pairs: Any = None) -> Reducer:
        """Learn the reduction from ``X`` (n_samples, dim_in).

        Parameters
        ----------
        X : array-like of shape (n_samples, dim_in)
        y : ignored
        pairs : array-like of shape (n_pairs, 2), optional
            Row indices of similar rows of ``X``; used only when ``learns_from_pairs``.

        Returns
        -------
        self
        """
        X = as_float32_2d(X)
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise ConfigError(
                f"{self.name}: fit input has {X.shape[0]} sample(s) and {X.shape[1]} feature(s) "
                f"(shape={X.shape}) while a minimum of 1 is required. Fit on at least one vector."
            )
        check_finite(X, "fit input")
        self._check_n_components(X)
        self.n_features_in_ = X.shape[1]
        if self.learns_from_pairs:
            self._fit(X, pairs=pairs)
        else:
            self._fit(X)
        return self

    def _check_n_components(self, X: np.ndarray) -> None:
        n_comp = getattr(self, "n_components", None)
        if n_comp is None:
            return
        if not isinstance(n_comp, (int, np.integer)) or n_comp < 1:
            raise ConfigError(f"n_components must be a positive integer, got {n_comp!r}.")
        if n_comp > X.shape[1]:
            raise ConfigError(
                f"{self.name}: n_components={n_comp} is larger than the input dimension "
                f"{X.shape[1]}. Choose n_components <= {X.shape[1]}."
            )
        if self._needs_samples_ge_components() and n_comp > X.shape[0]:
            raise ConfigError(
                f"{self.name}: n_components={n_comp} is larger than the {X.shape[0]} fit sample(s). "
                f"Fit on at least {n_comp} vectors or lower n_components."
            )

    def _needs_samples_ge_components(self) -> bool:
        return True

    def _fit(self, X: np.ndarray, **kwargs: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------- transforming
    def _check_fitted(self) -> None:
        if not hasattr(self, "n_features_in_"):
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet. Call 'fit' with appropriate "
                "arguments before using this estimator."
            )

    def _check_input(self, X: Any, what: str = "transform input") -> np.ndarray:
        self._check_fitted()
        X = as_float32_2d(X, what)
        if X.shape[1] != self.n_features_in_:
            raise DimensionMismatchError(
                f"{self.name} reducer input",
                self.n_features_in_,
                X.shape[1],
                "The vectors come from a different encoder than the one the reducer was fitted on.",
            )
        check_finite(X, what)
        return X

    def transform(self, X: Any) -> np.ndarray:
        """Reduce ``X`` to float32 of shape (n_samples, n_components_)."""
        X = self._check_input(X)
        Z = np.asarray(self._transform(X), dtype=np.float32)
        if getattr(self, "normalize", False):
            Z = l2_normalize(Z)
        return np.ascontiguousarray(Z)

    def transform_query(self, X: Any) -> np.ndarray:
        """Reduce queries (what a search embeds): :meth:`transform`, unless the reducer projects
        queries on their own side (LeanVec's out-of-distribution ``A``)."""
        return self.transform(X)

    def _transform(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def inverse_transform(self, Z: Any) -> np.ndarray:
        """Map reduced vectors back to the input space (only where ``has_inverse``)."""
        if not self.has_inverse:
            raise NotImplementedError(f"{self.name} has no inverse_transform.")
        self._check_fitted()
        Z = as_float32_2d(Z, "inverse_transform input")
        if Z.shape[1] != self.n_components_:
            raise DimensionMismatchError(
                f"{self.name} inverse_transform input", self.n_components_, Z.shape[1]
            )
        return np.ascontiguousarray(self._inverse_transform(Z), dtype=np.float32)

    def _inverse_transform(self, Z: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    # ---------------------------------------------------------------- identity
    @property
    def spec(self) -> str:
        """Canonical spec string of this configured reducer (``pca:96``)."""
        params = self.get_params(deep=False)
        arg = params.pop(self.spec_arg, None) if self.spec_arg else None
        defaults = {
            k: p.default
            for k, p in inspect.signature(type(self).__init__).parameters.items()
            if p.default is not inspect.Parameter.empty
        }
        options = {k: v for k, v in params.items() if k in defaults and v != defaults[k]}
        if arg is None and hasattr(self, "n_components_") and self.spec_arg:
            arg = self.n_components_
        return format_spec(self.name, arg, options)

    # ------------------------------------------------------------- persistence
    def _state(self) -> dict[str, np.ndarray]:
        """Fitted arrays to persist (override)."""
        return {}

    def _meta(self) -> dict[str, Any]:
        """Fitted JSON-serialisable scalars to persist (override to add)."""
        return {"n_components_": int(self.n_components_)}

    def _restore(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Put fitted state back (override when arrays need checking or rebuilding)."""
        for key, value in meta.items():
            setattr(self, key, value)
        for key, value in arrays.items():
            setattr(self, key, value)

    def _expected_shapes(self, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        """Shapes the saved arrays must have, checked on load (override)."""
        return {}

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Save as an artifact folder (``config.json`` + ``state.safetensors``)."""
        self._check_fitted()
        meta = dict(self._meta())
        meta["n_features_in_"] = int(self.n_features_in_)
        config = {
            "type": self.name,
            "spec": self.spec,
            "params": self.get_params(deep=False),
            "fitted": meta,
            "dim_in": int(self.n_features_in_),
            "dim_out": int(self.n_components_),
        }
        return save_artifact(path, config, self._state(), kind=ARTIFACT_KIND)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Reducer:
        """Load any reducer artifact; dispatches on its ``type`` through the registry."""
        from slimvec.reducers.registry import reducer_class

        config, arrays = load_artifact(path, kind=ARTIFACT_KIND)
        cfg_file = Path(path) / "config.json"
        try:
            klass = reducer_class(config.get("type", ""))
        except ConfigError as exc:
            raise PersistenceError(f"{cfg_file}: {exc}") from exc
        if cls is not Reducer and not issubclass(klass, cls):
            raise PersistenceError(f"{cfg_file}: holds a {klass.__name__}, not a {cls.__name__}.")
        try:
            obj = klass(**config.get("params", {}))
        except TypeError as exc:
            raise PersistenceError(f"{cfg_file}: parameters do not fit {klass.__name__}: {exc}.") from exc
        meta = config.get("fitted", {})
        for key, shape in obj._expected_shapes(meta).items():
            got = arrays.get(key)
            if got is None or tuple(got.shape) != tuple(shape):
                raise PersistenceError(
                    f"{Path(path) / 'state.safetensors'}: array {key!r} should have shape "
                    f"{tuple(shape)}, got {None if got is None else tuple(got.shape)}."
                )
        obj._restore(meta, arrays)
        return obj
