"""The one place the Ray engine hands reduced batches to the single writer.

Batches arrive already reduced by the encoder actors, so the writer gets a pass-through reducer.
Today this calls :func:`slimvec.indexer.writer.write_batches` (the commit loop of ``ingest``);
when the ``IndexBuilder`` of issue 13 lands, only this module changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from slimvec.indexer.writer import IngestSummary, VectorBatch, write_batches

__all__ = ["Prereduced", "write_reduced"]


class Prereduced:
    """A reducer stand-in for vectors reduced upstream: checks the dimension, changes nothing."""

    def __init__(self, dim: int) -> None:
        self.n_features_in_ = int(dim)
        self.n_components_ = int(dim)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Return ``X`` as float32."""
        return np.asarray(X, dtype=np.float32)


def write_reduced(folder: Path, manifest: dict[str, Any], store: Any, dim_out: int,
                  batches: Iterator[VectorBatch], summary: IngestSummary,
                  checkpoint_seconds: float, checkpoint_batches: int, strict: bool,
                  on_commit: Callable[[], None]) -> None:
    """Upsert reduced batches through the shared commit loop (rejects, checkpoints, finalize)."""
    write_batches(folder, manifest, store, Prereduced(dim_out), batches, summary,
                  lambda n: None, checkpoint_seconds, checkpoint_batches=checkpoint_batches,
                  strict=strict, on_commit=on_commit)
