"""``none``: the identity reducer, for full-dimension baselines."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from slimvec.reducers.base import Reducer, l2_normalize

__all__ = ["IdentityReducer"]


class IdentityReducer(Reducer):
    """Keep vectors as they are (optionally renormalised).

    Parameters
    ----------
    normalize : bool, default True
        L2-normalise outputs (a no-op for already normalised encoder output).
    """

    name: ClassVar[str] = "none"
    has_inverse: ClassVar[bool] = True
    spec_arg: ClassVar[str | None] = None

    def __init__(self, normalize: bool = True) -> None:
        self.normalize = normalize

    def _fit(self, X: np.ndarray) -> None:
        self.n_components_ = X.shape[1]

    def _needs_samples_ge_components(self) -> bool:
        return False

    def transform(self, X: Any) -> np.ndarray:
        """``X`` checked as float32 (n_samples, dim), as a new array (unit rows with ``normalize``)."""
        X = self._check_input(X)
        return l2_normalize(X) if self.normalize else X.copy()

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return X.copy()

    def _inverse_transform(self, Z: np.ndarray) -> np.ndarray:
        return Z.copy()
