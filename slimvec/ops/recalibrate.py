"""Calibrate a finished index's ``rescore=auto`` depth on real queries (``slimvec calibrate``).

The writer calibrates on corpus vectors used as queries; this re-measures the depth on the
user's own queries, stores them in the index folder and records the new depth in the manifest,
under the writer lock (no ingest can run meanwhile). Later calibrations of the index (a later
ingest, the service as the index grows) keep using the stored queries.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slimvec.connectors.base import check_vectors
from slimvec.errors import ConfigError, DimensionMismatchError
from slimvec.index.manifest import RescoreInfo
from slimvec.indexer.builder import BuildSpec, IndexBuilder
from slimvec.recipe import DEFAULT_RECIPE
from slimvec.sources.readers import Reject, SourceSpec, iter_records

__all__ = ["QueryFile", "read_query_file", "calibrate_index"]

@dataclass
class QueryFile:
    """The texts of a query file and the rows it could not use.

    Attributes
    ----------
    texts : list of str
        One query per accepted row, in file order.
    rejects : list of Reject
        Rows without usable text (file, row, field, reason).
    rows : int
        Rows read (``len(texts) + len(rejects)``).
    """

    texts: list[str] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return len(self.texts) + len(self.rejects)


def read_query_file(path: str | os.PathLike[str], text_column: str = "text",
                    format: str | None = None) -> QueryFile:
    """Read queries from a text file (one per line), JSONL, CSV, TSV or Parquet.

    Raises
    ------
    ConfigError
        Missing file, unknown format, missing text column, or no usable query at all.
    """
    out = QueryFile()
    for rec in iter_records(SourceSpec(str(path), text_column, None, format)):
        if isinstance(rec, Reject):
            out.rejects.append(rec)
        else:
            out.texts.append(rec.text)
    if not out.texts:
        raise ConfigError(f"{path}: no usable query in {out.rows:,} row(s) (column "
                          f"{text_column!r}); give a file with one query text per row.")
    return out


def calibrate_index(folder: str | os.PathLike[str], queries: Sequence[str] | np.ndarray, *,
                    trust_store: str | bool | None = None,
                    notify: Callable[[str], None] | None = None) -> RescoreInfo:
    """Calibrate the ``rescore=auto`` depth of the index in ``folder`` on ``queries``.

    Parameters
    ----------
    folder : path
        A finished index built with a ``rescore=auto`` recipe (the default recipe is one).
    queries : sequence of str or ndarray
        Query texts (encoded with the index's encoder) or full-dimension query vectors
        (float32, (n, dim_in); the only form for an index migrated from vectors).
    trust_store : str or bool, optional
        As for :func:`~slimvec.index.folder.open_index` (a store outside the folder).
    notify : callable, optional
        Receives progress messages.

    Returns
    -------
    RescoreInfo
        The depth now recorded in the manifest, with the recall measured on the queries.

    Raises
    ------
    ConfigError
        No index, no ``rescore=auto``, an unfinished build, fewer than two vectors, no
        queries, texts for an index without encoder.
    DimensionMismatchError
        Query vectors of another dimension than the index's input.
    IndexBusyError
        Another process writes the index.
    """
    with IndexBuilder(folder, notify=notify, trust_store=trust_store) as b:
        old = b.existing
        if old is None:
            raise ConfigError(f"{folder} holds no index (no manifest.json); build one with "
                              "`slimvec ingest` first.")
        if not old.auto_rescore:
            raise ConfigError(
                f"{folder} was built with recipe {old.recipe!r}, not a rescore=auto recipe, so it "
                "has no calibrated depth to measure; search it with --rescore R, or rebuild it with "
                f"e.g. --recipe '{DEFAULT_RECIPE}'.")
        if not old.completed:
            raise ConfigError(f"{folder}: its last build did not finish; rerun that ingest (it "
                              "resumes) before calibrating.")
        vectors = _query_vectors(folder, old, queries)
        b.open(BuildSpec.reopen(old), old.dim_in)
        b.calibrate(queries=vectors)
        return b.manifest.rescore


def _query_vectors(folder: Any, manifest: Any, queries: Sequence[str] | np.ndarray) -> np.ndarray:
    dim = int(manifest.dim_in)
    if isinstance(queries, np.ndarray):
        q = check_vectors(queries, dim, f"query vectors for {folder}")
        if not len(q):
            raise ConfigError(f"no query vectors given to calibrate {folder} on.")
        if not np.isfinite(q).all():
            raise ConfigError(f"query vectors for {folder}: rows "
                              f"{np.flatnonzero(~np.isfinite(q).all(axis=1))[:5].tolist()} hold NaN "
                              "or infinite values; drop or fix them.")
        return q
    texts = list(queries)
    if not texts:
        raise ConfigError(f"no queries given to calibrate {folder} on.")
    if not manifest.encoder:
        raise ConfigError(f"{folder} was built from vectors (migrate) and has no encoder; pass "
                          "query vectors of its source model (calibrate_index(folder, vectors)).")
    encoder = BuildSpec.reopen(manifest).load_encoder()
    if encoder.dim != dim:
        raise DimensionMismatchError(f"encoder {manifest.encoder} output vs reducer input of "
                                     f"{folder}", dim, encoder.dim)
    return encoder.encode_queries(texts).astype(np.float32)
