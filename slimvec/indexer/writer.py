"""The commit loop shared by ``ingest`` (documents -> encoder) and ``migrate`` (existing vectors).

:func:`write_batches` reduces and upserts a stream of :class:`VectorBatch`, writes bad rows to
``rejects.jsonl`` and checkpoints. A checkpoint is the commit point of the run, in this order:

1. ``rejects.jsonl`` flushed and fsynced;
2. ``store.flush()`` (Qdrant Edge flushed, FAISS / hnswlib written to a temporary file, fsynced
   and renamed into place, remote Qdrant already acknowledged every upsert with ``wait=true``);
3. extra state committed (the duplicate tracker);
4. the manifest's progress record (``next_row``, ``rejects_bytes``, ``count``) written atomically.

A crash anywhere leaves the store at or ahead of the record, never behind it, and ids are
deterministic, so the rows re-read after a resume overwrite instead of duplicating. The first
SIGINT / SIGTERM stops the loop at the next batch boundary with a final checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from slimvec.errors import ConfigError
from slimvec.indexer.checks import dedupe_last, split_bad_vectors
from slimvec.indexer.index import write_manifest
from slimvec.indexer.interrupt import StopFlag
from slimvec.indexer.sources import Reject

__all__ = ["IngestSummary", "VectorBatch", "write_batches", "REJECTS"]

log = logging.getLogger(__name__)
REJECTS = "rejects.jsonl"


@dataclass
class IngestSummary:
    """What one ingest (or migrate) run did.

    ``rejected`` counts rows left out; ``truncated`` and ``duplicates`` count rows ingested with a
    warning (also listed in ``rejects.jsonl`` with ``"kept": true``).
    """

    index: str
    input: str = ""
    rows: int = 0
    ingested: int = 0
    rejected: int = 0
    truncated: int = 0
    duplicates: int = 0
    count: int = 0
    seconds: float = 0.0
    total_seconds: float = 0.0
    encode_seconds: float = 0.0
    fit_seconds: float = 0.0
    created: bool = False
    resumed_from: int | None = None
    next_row: int = 0
    interrupted: bool = False
    already_done: bool = False
    reject_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def docs_per_s(self) -> float:
        """Ingested documents per second of the whole run (sampling, fit, streaming, indexing)."""
        return self.ingested / self.total_seconds if self.total_seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        out = asdict(self)
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
    """

    ids: np.ndarray
    vectors: Any
    payloads: list[dict[str, Any]]
    rejects: list[Reject]
    next_row: int
    rows: Sequence[int] | None = None
    lines: Sequence[int | None] | None = None
    source: str = ""


class _Checkpointer:
    """Commits (see module docstring) every ``every_s`` seconds or ``every_batches`` batches."""

    def __init__(self, folder: Path, manifest: dict[str, Any], store: Any, every_s: float,
                 every_batches: int, rejects_fh: Any,
                 on_commit: Callable[[], None] | None) -> None:
        self.folder, self.manifest, self.store = folder, manifest, store
        self.every_s, self.every_batches = every_s, every_batches
        self.rejects_fh, self.on_commit = rejects_fh, on_commit
        self.last = time.monotonic()
        self.batches = 0

    def maybe(self, next_row: int, force: bool = False, state: str = "running") -> None:
        self.batches += 1
        due = (time.monotonic() - self.last >= self.every_s
               or (self.every_batches > 0 and self.batches >= self.every_batches))
        if not (force or due):
            return
        self.rejects_fh.flush()
        os.fsync(self.rejects_fh.fileno())
        self.store.flush()
        if self.on_commit is not None:
            self.on_commit()
        progress = self.manifest["progress"]
        progress.update(next_row=int(next_row), rejects_bytes=int(self.rejects_fh.tell()),
                        state=state)
        self.manifest["count"] = int(self.store.count())
        write_manifest(self.folder, self.manifest)
        self.last = time.monotonic()
        self.batches = 0


def _strict_error(rej: Reject) -> ConfigError:
    where = f"row {rej.row}" + (f" (line {rej.line})" if rej.line is not None else "")
    return ConfigError(
        f"{rej.source}: {where}: {rej.reason} (field {rej.field!r}, {rej.snippet!r}). --strict "
        "makes the first bad row fatal; drop --strict to skip bad rows into rejects.jsonl."
    )


def write_batches(folder: Path, manifest: dict[str, Any], store: Any, reducer: Any,
                  batches: Iterator[VectorBatch], summary: IngestSummary,
                  advance: Callable[[int], None], checkpoint_seconds: float,
                  on_batch: Callable[[int], None] | None = None, *,
                  checkpoint_batches: int = 0, strict: bool = False,
                  on_commit: Callable[[], None] | None = None) -> None:
    """Reduce and upsert a stream of batches, record rejects, checkpoint, finalize, close.

    Parameters
    ----------
    folder : Path
        Index folder (``manifest.json`` and ``rejects.jsonl`` live there).
    manifest : dict
        The index manifest; ``manifest['progress']`` must hold at least ``next_row``.
    store : VectorStore
        Opened store; closed on return.
    reducer : Reducer
        Fitted reducer applied to every batch.
    batches : iterator of VectorBatch
    summary : IngestSummary
        Updated in place (counts, ``next_row``, ``interrupted``).
    advance : callable
        Progress-bar hook, called with the rows of each batch.
    checkpoint_seconds, checkpoint_batches : float, int
        Commit at least this often (``checkpoint_batches=0``: by time only), and at the end.
    on_batch : callable, optional
        Called with the next row after each batch has been upserted.
    strict : bool
        Raise :class:`ConfigError` at the first rejected row instead of recording it.
    on_commit : callable, optional
        Commits extra state at each checkpoint, after the store flushed and before the record.
    """
    next_row = int(manifest["progress"].get("next_row", 0))
    summary.next_row = next_row
    dim_in = int(reducer.n_features_in_)
    try:
        with open(folder / REJECTS, "a", encoding="utf-8") as rejects_fh, StopFlag() as stop:
            checkpoint = _Checkpointer(folder, manifest, store, checkpoint_seconds,
                                       checkpoint_batches, rejects_fh, on_commit)
            for batch in batches:
                _write_one(batch, store, reducer, dim_in, rejects_fh, summary, strict)
                n = len(batch.ids) + sum(not r.kept for r in batch.rejects)
                summary.rows += n
                advance(n)
                next_row = batch.next_row
                if on_batch is not None:
                    on_batch(next_row)
                if stop.requested:
                    checkpoint.maybe(next_row, force=True)
                    summary.interrupted = True
                    break
                checkpoint.maybe(next_row)
            if not summary.interrupted:
                store.finalize()
                checkpoint.maybe(next_row, force=True, state="done")
            summary.next_row = next_row
    finally:
        try:
            summary.count = int(store.count())
        finally:
            store.close()


def _write_one(batch: VectorBatch, store: Any, reducer: Any, dim_in: int, rejects_fh: Any,
               summary: IngestSummary, strict: bool) -> None:
    rejects = list(batch.rejects)
    ids = np.asarray(batch.ids, dtype=np.int64)
    payloads = list(batch.payloads)
    if len(ids):
        good, vectors, bad = split_bad_vectors(batch.vectors, dim_in, batch.rows, batch.source,
                                               batch.lines)
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
                raise _strict_error(rej)
    if len(ids):
        if hasattr(reducer, "transform_with_clusters"):  # mcr2: each row's cluster id in its payload
            reduced, clusters = reducer.transform_with_clusters(vectors)
            payloads = [{**p, "cluster": int(c)} for p, c in zip(payloads, clusters)]
        else:
            reduced = reducer.transform(vectors)
        store.upsert(ids, reduced, payloads)
        summary.ingested += len(ids)
    for rej in rejects:
        rejects_fh.write(json.dumps(rej.to_json(), ensure_ascii=False) + "\n")
        if rej.kept:
            if rej.reason.startswith("duplicate id"):
                summary.duplicates += 1
            else:
                summary.truncated += 1
            continue
        summary.rejected += 1
        summary.reject_reasons[rej.reason] = summary.reject_reasons.get(rej.reason, 0) + 1
