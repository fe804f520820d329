"""Calibration of the index writer: the ``rescore=auto`` depth measured on the committed index.

:class:`DepthCalibration` is a part of :class:`~slimvec.indexer.builder.IndexBuilder` (split out
of it, issue 24 item 2): ``finish`` calibrates, and a long-lived writer (the service) asks
:meth:`~DepthCalibration.calibration_due` after its commits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import ConfigError
from slimvec.index.calibration_queries import CALIBRATION_QUERIES_FILE, load_calibration_queries, save_calibration_queries
from slimvec.index.manifest import Manifest
from slimvec.index.search_costs import measure_search_costs
from slimvec.indexer.calibrate import rescore_for_recipe
from slimvec.indexer.keepfull import KeepFullStore
from slimvec.persistence import sha256_file
from slimvec.reducers import Reducer

__all__ = ["DepthCalibration"]


class DepthCalibration:
    """``rescore=auto`` calibration of an opened index (mixed into ``IndexBuilder``)."""

    folder: Path
    manifest: Manifest | None
    reducer: Reducer | None
    store: Any
    say: Callable[[str], None]
    _target: Any

    @property
    def auto_rescore(self) -> bool:
        """True when the index's recipe calibrates its rescoring depth (``rescore=auto``)."""
        return self.manifest is not None and self.manifest.auto_rescore

    def calibration_due(self, growth: float = 2.0) -> bool:
        """True when an ``auto`` depth was never calibrated, or the index has grown ``growth``
        times since (the depth needed grows with N); a long-lived writer (the service) asks
        after its commits."""
        if not self.auto_rescore or self.manifest is None:
            return False
        count = int(self.manifest.count)
        done = self.manifest.rescore
        return count >= 2 and (done is None or count >= growth * max(done.n_corpus, 1))

    def calibrate(self, write: bool = True, queries: np.ndarray | None = None) -> bool:
        """Calibrate a ``rescore=auto`` depth on the committed index (``finish`` does it; the
        service also does it as the index grows); records it in the manifest, written when
        ``write``. Returns whether anything was calibrated.

        Parameters
        ----------
        write : bool
            Write the manifest now.
        queries : ndarray, optional
            Real query vectors (float32, (n, dim_in)) to calibrate on from now on: stored in the
            folder (:mod:`slimvec.index.calibration_queries`) and used by every later
            calibration of this index. Default: the stored ones if any, else corpus vectors.

        Raises
        ------
        ConfigError
            ``queries`` given for an index of fewer than two vectors.
        """
        m = self.manifest
        if not self.auto_rescore or m is None:
            return False
        given = queries is not None
        if not given and m.rescore is not None and m.rescore.queries is not None:
            queries = load_calibration_queries(self.folder, int(m.dim_in))
        self.say("calibrating the rescoring depth (rescore=auto) on "
                 + (f"{len(queries):,} {'given' if given else 'stored'} queries"
                    if queries is not None else "a sample of the index"))
        rescore = rescore_for_recipe(
            m.recipe, self.store, self.reducer,
            self._target.full if isinstance(self._target, KeepFullStore) else None,
            queries=queries)
        if given and rescore is None:  # fewer than two vectors: nothing to find for them
            raise ConfigError(f"{self.folder}: {m.count} vector(s) committed, too few to calibrate "
                              "on; add documents first.")
        if rescore is not None and queries is not None:
            rescore = replace(rescore, queries=CALIBRATION_QUERIES_FILE)
            if given:  # kept only once they calibrated: a refused calibration leaves no file
                path = save_calibration_queries(self.folder, queries)
                m.sha256[CALIBRATION_QUERIES_FILE] = sha256_file(path)
        if rescore is not None and rescore.calibrated:
            self.say(f"rescoring depth {rescore.depth}: neighbour recall@{rescore.k} "
                     f"{rescore.recall:.4f} on {rescore.n_queries:,} "
                     + ("given queries" if queries is not None else
                        f"corpus vectors, calibrated for {rescore.target:g} on them so that "
                        "real queries reach the recipe's target (queries unlike the corpus may "
                        "need more: slimvec calibrate --queries FILE, docs/recipes.md)"))
            if rescore.reached is False:
                self.say(f"warning: rescore=auto {rescore.status}")
        m.rescore = rescore
        full = self._target.full if isinstance(self._target, KeepFullStore) else None
        if rescore is not None and full is not None:  # the filtered planner's costs (issue 51)
            try:
                m.search_costs = measure_search_costs(self.store, self.reducer, full, rescore.depth)
            except Exception as exc:  # noqa: BLE001 - a timing must never fail the writer
                self.say(f"warning: search costs not measured ({type(exc).__name__}: {exc})")
        if write:
            m.write(self.folder)
        return True
