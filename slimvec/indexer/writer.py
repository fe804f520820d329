"""What a batch is, what a run reports, and how one batch is written.

:class:`VectorBatch` is what every producer (ingest, migrate, the service) hands to
:class:`~slimvec.indexer.builder.IndexBuilder`; :func:`write_batch` checks, reduces and upserts
one and appends its rejects to ``rejects.jsonl``. Durability (the commit order) is the builder's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from slimvec.errors import ConfigError
from slimvec.sources.checks import dedupe_last, split_bad_vectors
from slimvec.sources.readers import Reject
from slimvec.sources.rowcheck import split_bad_payloads

__all__ = ["IngestSummary", "VectorBatch", "write_batch", "strict_error", "REJECTS", "Prereduced",
           "with_bad_full_rows_marked"]

log = logging.getLogger(__name__)
REJECTS = "rejects.jsonl"


@dataclass
class IngestSummary:
    """What one ingest (or migrate) run did.

    ``rejected`` counts rows left out; ``truncated``, ``duplicates`` and ``warnings`` (any other
    kept warning, e.g. a payload value made storable) count rows ingested with a warning (also listed in ``rejects.jsonl`` with ``"kept": true``). ``rows`` counts the rows
    this run accounted for (upserted or rejected); ``rows_read`` the source rows this run read
    (``next_row - resumed_from``). Every run checks they agree; ``unaccounted`` is the difference
    (0 unless a source lost or invented records, which is also logged as a warning).
    """

    index: str
    input: str = ""
    rows: int = 0
    rows_read: int = 0
    unaccounted: int = 0
    ingested: int = 0
    rejected: int = 0
    truncated: int = 0
    duplicates: int = 0
    warnings: int = 0
    count: int = 0
    seconds: float = 0.0
    total_seconds: float = 0.0
    encode_seconds: float = 0.0
    #: CPU seconds of the encoding thread (the whole encoder's on one torch thread, ``--threads 1``)
    encode_cpu_seconds: float = 0.0
    fit_seconds: float = 0.0
    created: bool = False
    resumed_from: int | None = None
    next_row: int = 0
    interrupted: bool = False
    already_done: bool = False
    reject_reasons: dict[str, int] = field(default_factory=dict)
    warning_reasons: dict[str, int] = field(default_factory=dict)
    recipe: str | None = None  # what the index was built with (reducer|store[|options])
    # --engine ray: {node IP: blocks, documents, encode_seconds, write_seconds} (left out if empty)
    nodes: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def docs_per_s(self) -> float:
        """Ingested documents per second of the whole run (sampling, fit, streaming, indexing)."""
        return self.ingested / self.total_seconds if self.total_seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        out = asdict(self)
        if not out["nodes"]:
            del out["nodes"]
        out["docs_per_s"] = round(self.docs_per_s, 1)
        return out


@dataclass
class VectorBatch:
    """One batch on its way to the store: full-dimension vectors before reduction.

    Attributes
    ----------
    ids : ndarray of int64
        Store ids (:func:`slimvec.ids.doc_id` of the source ids).
    vectors : ndarray of float32, shape (n, dim_in), or a sequence of 1-D arrays
        Rows with NaN / inf values or another dimension become rejects.
    payloads : list of dict
    rejects : list of Reject
        Rows of this batch that could not be ingested (or were, with a warning: ``kept``).
    next_row : int
        Source row to resume from once this batch is committed.
    rows, lines : sequences, optional
        Source row / line of each vector, for the rejects of bad vectors.
    source : str
        Source name for the rejects of bad vectors.
    reduced : bool
        The producer already applied this index's reducer (a copy of its saved artifact, e.g.
        the Ray engine's encoder actors): ``vectors`` have shape (n, dim_out) and are upserted as
        they are (bad rows and duplicate ids are still rejected / deduplicated).
    full : ndarray of float32, shape (n, dim_in), optional
        With ``reduced``: the full vectors of the same rows, which an index that keeps full
        vectors (``--keep-full``) needs and refuses the batch without.
    check_norms : bool
        Reject rows whose norm is far from the batch's (a file producer's check for corrupt
        rows); off for the rows a caller gives (the service, ``LocalIndex``).
    segment : str, optional
        A finished segment folder (:mod:`slimvec.indexer.segments`) the writer adopts whole in
        place of rows: ``ids`` and ``vectors`` are then empty.
    """

    ids: np.ndarray
    vectors: Any
    payloads: list[dict[str, Any]]
    rejects: list[Reject]
    next_row: int
    rows: Sequence[int] | None = None
    lines: Sequence[int | None] | None = None
    source: str = ""
    reduced: bool = False
    full: np.ndarray | None = None
    check_norms: bool = True
    segment: str | None = None


def strict_error(rej: Reject) -> ConfigError:
    """The error ``strict`` raises for a rejected row."""
    where = f"row {rej.row}" + (f" (line {rej.line})" if rej.line is not None else "")
    return ConfigError(
        f"{rej.source}: {where}: {rej.reason} (field {rej.field!r}, {rej.snippet!r}). --strict "
        "makes the first bad row fatal; drop --strict to skip bad rows into rejects.jsonl."
    )


def write_batch(batch: VectorBatch, store: Any, reducer: Any, dim_in: int, rejects_fh: Any,
                summary: IngestSummary, strict: bool) -> None:
    """Check, dedupe, reduce and upsert one batch; append its rejects; update ``summary``.

    Not durable by itself: :meth:`slimvec.indexer.builder.IndexBuilder.commit` makes it so.
    """
    rejects = list(batch.rejects)
    ids = np.asarray(batch.ids, dtype=np.int64)
    payloads = list(batch.payloads)
    if len(ids):
        vectors, rows, lines = batch.vectors, batch.rows, batch.lines
        # what no store can hold (too deep, not UTF-8, too large) is rejected here, where every
        # producer passes, before anything is upserted (issue 23 A1, A2, 11)
        ok = np.ones(len(ids), dtype=bool)
        if len(payloads) == len(ids):
            ok, payloads, bad_payloads = split_bad_payloads(payloads, rows, lines, batch.source)
            rejects.extend(bad_payloads)
        if not ok.all():
            keep_rows = np.flatnonzero(ok)
            ids = ids[keep_rows]
            vectors = vectors[keep_rows] if isinstance(vectors, np.ndarray) \
                else [vectors[i] for i in keep_rows]
            rows = [rows[i] for i in keep_rows] if rows is not None else keep_rows.tolist()
            lines = [lines[i] for i in keep_rows] if lines is not None else None
    if len(ids):
        good, vectors, bad = split_bad_vectors(vectors, dim_in, rows, batch.source, lines,
                                               batch.check_norms)
        if bad:
            rejects.extend(bad)
            ids = ids[good]
            payloads = [p for p, g in zip(payloads, good) if g]
        keep = dedupe_last(ids)  # one upsert per id: a store must never see the same id twice
        if keep is not None:
            ids, vectors = ids[keep], vectors[keep]
            payloads = [payloads[i] for i in keep]
    if strict:
        for rej in rejects:
            if not rej.kept:
                raise strict_error(rej)
    if len(ids):
        if hasattr(reducer, "transform_with_clusters"):  # mcr2: each row's cluster id in its payload
            reduced, clusters = reducer.transform_with_clusters(vectors)
            payloads = [{**p, "cluster": int(c)} for p, c in zip(payloads, clusters)]
        else:
            reduced = reducer.transform(vectors)
        store.upsert(ids, reduced, payloads)
        summary.ingested += len(ids)
    for rej in rejects:
        line = json.dumps(rej.to_json(), ensure_ascii=False)
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in a snippet: escaped, never a failed write
            line = json.dumps(rej.to_json())
        rejects_fh.write(line + "\n")
        if rej.kept:
            if rej.reason.startswith("duplicate id"):
                summary.duplicates += 1
            elif rej.reason.startswith("text truncated"):
                summary.truncated += 1
            else:  # kept with a warning: a payload value made storable, a multi-line record
                summary.warnings += 1
                summary.warning_reasons[rej.reason] = summary.warning_reasons.get(rej.reason, 0) + 1
            continue
        summary.rejected += 1
        summary.reject_reasons[rej.reason] = summary.reject_reasons.get(rej.reason, 0) + 1


def with_bad_full_rows_marked(batch: VectorBatch, dim_in: int) -> VectorBatch:
    """A reduced batch whose rows with a bad full vector (NaN, inf, wrong length) get a NaN
    reduced vector too, so the commit loop rejects them instead of upserting a row whose full
    vector cannot be kept."""
    full = batch.full
    n = len(batch.ids)
    if full is None or (isinstance(full, np.ndarray) and full.shape == (n, dim_in)
                        and np.isfinite(full).all()):
        return batch
    if len(full) != n:
        raise ConfigError(f"a reduced batch of {n} rows came with {len(full)} full vectors; the "
                          "producer must send one full vector per row.")
    good, _, _ = split_bad_vectors(full, dim_in, None, batch.source, norms=batch.check_norms)
    vectors = np.array(batch.vectors, dtype=np.float32)  # a copy: the producer's array is kept
    vectors[~good] = np.nan
    return replace(batch, vectors=vectors)


class Prereduced:
    """The reducer of a ``reduced`` batch: the producer applied the real one already."""

    def transform(self, X: np.ndarray) -> np.ndarray:
        """``X`` as float32, unchanged."""
        return np.asarray(X, dtype=np.float32)
