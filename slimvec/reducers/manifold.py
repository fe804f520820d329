"""``umap:D`` — UMAP (McInnes et al. 2018) through umap-learn, with its ``transform``.

**Slow.** umap-learn compiles its numba kernels on first use (tens of seconds in a fresh
environment), fitting builds a neighbour graph and runs hundreds of optimisation epochs, and
``transform`` of new points runs a further optimisation against the fitted embedding (seconds per
thousand vectors; the linear reducers take milliseconds). It is here as the baseline of the
EmbedTextNet paper, not as a practical default.

**Not persistable.** See :class:`UMAPReducer`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from slimvec.errors import PersistenceError
from slimvec.reducers.base import Reducer

__all__ = ["UMAPReducer"]


class UMAPReducer(Reducer):
    """UMAP embedding learned on the fit sample; new vectors go through ``umap.UMAP.transform``.

    ``save`` raises :class:`PersistenceError`: a fitted ``umap.UMAP`` holds a pynndescent search
    index, a sparse fuzzy graph and numba-compiled state that umap-learn can only serialise with
    pickle, and slimvec never writes or reads pickles (loading one can execute arbitrary code).
    Re-creating a UMAP transform from saved arrays alone would be a re-implementation that does not
    reproduce umap-learn's outputs. Fit UMAP in the same process where you use it (benchmarks do),
    or choose a reducer that saves (``pca``, ``algo``, ``ae``, ``kpca``).

    Parameters
    ----------
    n_components : int, default 96
        Output dimension D (UMAP's authors recommend small D; large D is slow).
    n_neighbors : int, default 15
    min_dist : float, default 0.1
    metric : str, default "cosine"
    seed : int or None, default 0
        Fixes the result; it also makes umap-learn run single-threaded. ``None`` is parallel
        and non-deterministic.
    normalize : bool, default True
        L2-normalise the reduced vectors.

    Fitted attributes
    -----------------
    umap_ : umap.UMAP
    """

    name: ClassVar[str] = "umap"

    #: no artifact (``save`` refuses): benchmarked, never built into an index (benchmarks.ranking)
    persistable = False

    def __init__(
        self,
        n_components: int = 96,
        n_neighbors: int = 15,
        min_dist: float = 0.1,
        metric: str = "cosine",
        seed: int | None = 0,
        normalize: bool = True,
    ) -> None:
        self.n_components = n_components
        self.n_neighbors = n_neighbors
        self.min_dist = min_dist
        self.metric = metric
        self.seed = seed
        self.normalize = normalize

    def _fit(self, X: np.ndarray, **kwargs: Any) -> None:
        from slimvec.extras import require

        umap = require("umap", "umap", "The umap reducer (umap-learn)")
        # n_neighbors must stay below the sample size; tiny samples still get a valid graph
        neighbors = max(2, min(int(self.n_neighbors), len(X) - 1))
        self.umap_ = umap.UMAP(
            n_components=int(self.n_components),
            n_neighbors=neighbors,
            min_dist=float(self.min_dist),
            metric=self.metric,
            random_state=self.seed,
            n_jobs=1 if self.seed is not None else -1,
        ).fit(X)
        self.n_components_ = int(self.n_components)

    def _needs_samples_ge_components(self) -> bool:
        return True

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return self.umap_.transform(X)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Always raises :class:`PersistenceError` (see the class docstring)."""
        raise PersistenceError(
            f"Cannot save {self.spec} to {path}: UMAP artifacts are not supported. umap-learn "
            "can only serialise a fitted model (search index, graph, numba state) with pickle, "
            "and slimvec never writes pickles because loading one can run arbitrary code. "
            "Re-fit UMAP where you use it, or pick a reducer that saves (pca, algo, ae, kpca)."
        )
