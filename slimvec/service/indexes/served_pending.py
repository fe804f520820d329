"""Fit on arrival: an index created over HTTP without a fit sample lives in
``ROOT/.pending/NAME`` (``service.json`` and its rows, fsynced, in ``pending.jsonl``) until
``fit_after`` rows have arrived; then the builder creates the index folder and the rows are
written and committed. :class:`PendingRows` is that part of
:class:`~slimvec.service.indexes.served.ServedIndex` (moved out whole, its methods unchanged)."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from slimvec.errors import ConfigError, SlimvecError
from slimvec.ids import doc_ids
from slimvec.index.manifest import MANIFEST
from slimvec.index.safefs import append_lines_durable, read_jsonl_nofollow
from slimvec.indexer.builder import IndexSpec
from slimvec.indexer.writer import REJECTS, VectorBatch
from slimvec.reducers import make_reducer
from slimvec.service.indexes.encoders import Encoders
from slimvec.service.indexes.index_state import ConflictError, IndexState, WriteResult
from slimvec.service.indexes.pending import Journal, PendingSearch, Synced, row_vector, vector_field
from slimvec.service.indexes.spec import SERVICE_SPEC, ServiceSpec
from slimvec.service.indexes.writer import SERVICE_INPUT
from slimvec.sources.given import check_docs, check_vectors, common_dim

if TYPE_CHECKING:
    from slimvec.index.locking import IndexLock

__all__ = ["PendingRows", "PENDING", "PENDING_DIR", "read_pending"]

PENDING = "pending.jsonl"
#: ROOT/.pending/NAME holds an index created over HTTP until its reducer is fitted (the index
#: folder itself is created by IndexBuilder, which refuses folders holding files it did not write)
PENDING_DIR = ".pending"


class PendingRows:
    """The fit-on-arrival methods of :class:`~slimvec.service.indexes.served.ServedIndex`."""

    name: str
    folder: Path
    pending_dir: Path
    state: IndexState
    spec: ServiceSpec | None
    encoders: Encoders
    pending_rows: int
    lock: threading.RLock
    _pending_lock: IndexLock | None
    _pending_search: PendingSearch
    _journal: Journal

    def _open_builder(self, spec: IndexSpec | None, X: np.ndarray | None) -> None:
        raise NotImplementedError

    def _submit(self, batch: VectorBatch, rows: int) -> Any:
        raise NotImplementedError

    def info(self) -> dict[str, Any]:
        raise NotImplementedError

    def _creation_spec(self) -> ServiceSpec:
        """The spec the index was created with (it collects its fit sample)."""
        if self.spec is None:
            raise ConflictError(f"Index {self.name!r} is not collecting its fit sample: it has "
                                "no creation spec.")
        return self.spec

    def _embed_pending(self, texts: Sequence[str] | None, vectors: Any) -> np.ndarray:
        spec = self._creation_spec()
        if texts is not None:
            if not spec.encoder:
                raise ConfigError(f"Index {self.name!r} is built from vectors and has no encoder: "
                                  "send query vectors instead of texts.")
            return self.encoders.batcher(spec.build).encode(list(texts))
        vecs = np.asarray(vectors, dtype=np.float32)
        dim = spec.dim_in or (self.encoders.get(spec.build).dim if spec.encoder else None)
        if dim is not None and (vecs.ndim != 2 or vecs.shape[1] != int(dim)):
            raise ConfigError(f"Query vectors have dimension {vecs.shape[-1]}; index "
                              f"{self.name!r} takes full vectors of dimension {dim}.")
        return vecs

    def search_pending(self, queries: np.ndarray, k: int, allowed: set[int] | None = None
                       ) -> tuple[np.ndarray, np.ndarray, Callable[[list[int]], list]] | None:
        """Exact search over the documents collected before the reducer is fitted.

        Returns
        -------
        tuple or None
            ``(ids, scores, payloads_of)`` while the index collects its fit sample (cosine over
            the full vectors, exact), None once it has a fitted reducer (search the
            :meth:`ready_index` then).
        """
        with self.lock:
            view = self.pending_view()
            if view is None:
                return None
            ids, scores = view.search(queries, k, allowed)
            return ids, scores, view.payloads

    def pending_view(self) -> PendingSearch | None:
        """The pending rows in memory (payloads, vectors, count, records) while the index
        collects its fit sample, their vectors computed; None once it has a fitted reducer."""
        with self.lock:
            if self.state != IndexState.PENDING:
                return None
            self._pending_search.metric = self._creation_spec().build.metric or "cosine"
            self._pending_search.sync()
            return self._pending_search

    def pending_load(self) -> list[dict[str, Any]]:
        """Read ``pending.jsonl`` into memory (when the index opens); returns its rows."""
        rows = self._journal.load()
        self._pending_search = PendingSearch(self._pending_vectors, rows)
        self.pending_rows = len(rows)
        return rows

    def pending_replace(self, records: list[dict[str, Any]]) -> None:
        """Rewrite ``pending.jsonl`` (atomically) as ``records`` (one row per id, each with its
        ``store_id``: a delete or a payload change) and the rows in memory with it."""
        with self.lock:
            self._journal.rewrite([json.dumps({k: v for k, v in r.items() if k != "store_id"},
                                              ensure_ascii=False) for r in records])
            self._pending_search.replace(records)
            self.pending_rows = len(records)

    def fit_now(self) -> dict[str, Any]:
        """Fit the reducer on the documents collected so far, without waiting for ``fit_after``.

        Raises
        ------
        ConflictError
            The index is not collecting its fit sample (already fitted, or written by a job).
        ConfigError
            Nothing collected yet, or too few documents for the reducer.
        """
        with self.lock:
            if self.state != IndexState.PENDING:
                raise ConflictError(f"Index {self.name!r} is {self.state}, not collecting its fit "
                                    "sample: there is nothing to fit.")
            rows = list(self._pending_search.rows)
            if not rows:
                raise ConfigError(f"Index {self.name!r} has no documents yet: add some, then fit.")
            self._fit_and_flush(rows)
        return self.info()

    def _fit_and_flush(self, rows: list[dict[str, Any]]) -> None:
        try:
            self.create_from_sample(self._pending_vectors(rows))
        except BaseException:
            if not (self.folder / MANIFEST).exists():  # nothing was created: stay pending
                shutil.rmtree(self.folder, ignore_errors=True)
                self.state = IndexState.PENDING
            raise
        self._flush_pending(rows)


    # ------------------------------------------------------------------ fit on arrival
    def _add_pending(self, rows: list[dict[str, Any]], kind: str, source: str
                     ) -> tuple[WriteResult, Synced | None]:
        """Append checked rows to the journal (one ``write``, not fsynced: the returned future's
        ``result()`` waits for the group fsync) and to the rows in memory; fit and flush once
        ``fit_after`` rows arrived (then committed, no future)."""
        encoder = self._creation_spec().encoder
        if kind == "text" and not encoder:
            raise ConfigError(f"Index {self.name!r} has no encoder: add vectors, not documents.")
        if kind == "vector" and encoder:
            raise ConfigError(f"Index {self.name!r} encodes texts with {encoder}: add documents "
                              "(its reducer is fitted on its encoder's vectors).")
        if kind == "text":
            good_docs, rejects, changed = check_docs(rows, source)
            lines = [{"id": d.id, "text": d.text, "payload": d.payload} for d in good_docs]
        else:
            dim = self._creation_spec().dim_in
            if dim is None:  # the first vectors of the index: their dimension is its dimension
                dim = common_dim(rows)
                self.spec = self._creation_spec().with_dim_in(dim)
                self.spec.save(self.pending_dir / SERVICE_SPEC)  # kept on restart
            good, vecs, rejects, payloads, changed = check_vectors(rows, dim, source)
            lines = [{"id": rows[i]["id"], **vector_field(vecs[j]),
                      "payload": {k: v for k, v in payloads[j].items() if k != "source_id"}}
                     for j, i in enumerate(good)]
        append_lines_durable(self.pending_dir / REJECTS,
                             [json.dumps(r.to_json()) for r in rejects + changed])
        ticket = self._journal.append([json.dumps(x, ensure_ascii=False) for x in lines])
        self._pending_search.append(lines)
        self.pending_rows += len(lines)
        result = WriteResult(accepted=len(lines), rejected=[r.to_json() for r in rejects],
                             warnings=[w.to_json() for w in changed], committed=False,
                             pending_fit=True)
        if self.pending_rows >= self._creation_spec().fit_after:
            self._fit_and_flush(list(self._pending_search.rows))
            result.pending_fit, result.committed = False, True
            return result, None
        return result, Synced(self._journal, ticket)

    def _pending_vectors(self, rows: list[dict[str, Any]]) -> np.ndarray:
        if self._creation_spec().encoder:
            return self.encoders.get(self._creation_spec().build).encode([r["text"] for r in rows])
        if not rows:
            return np.zeros((0, self._creation_spec().dim_in or 0), dtype=np.float32)
        return np.stack([row_vector(r) for r in rows])

    def _flush_pending(self, rows: list[dict[str, Any]] | None = None) -> None:
        """Write the collected rows (and their rejects) into the fitted index, commit, clean up."""
        if rows is None:
            rows = self._journal.load()
        if rows:
            vecs = self._pending_vectors(rows)
            payloads = [{**r.get("payload", {}), "source_id": r["id"],
                         **({"text": r["text"]} if "text" in r else {})} for r in rows]
            batch = VectorBatch(doc_ids([r["id"] for r in rows]), vecs, payloads, [], 0,
                                list(range(len(rows))), [None] * len(rows), SERVICE_INPUT)
            self._submit(batch, len(rows)).result()
        pending_rejects = self.pending_dir / REJECTS
        if pending_rejects.exists():
            append_lines_durable(self.folder / REJECTS,
                                 pending_rejects.read_text("utf-8").splitlines())
        if self._pending_lock is not None:
            self._pending_lock.release()
            self._pending_lock = None
        self._journal.retire()  # committed into the index: writes waiting for an fsync are done
        shutil.rmtree(self.pending_dir, ignore_errors=True)
        self.pending_rows = 0
        self._pending_search = PendingSearch(self._pending_vectors)

    def create_from_sample(self, X: np.ndarray) -> None:
        """Fit the reducer on ``X`` and create the index through :class:`IndexBuilder`."""
        spec = self._creation_spec()
        X = np.asarray(X, dtype=np.float32)
        X = X[np.isfinite(X).all(axis=1)] if X.ndim == 2 else X
        if X.ndim != 2 or not len(X):
            raise ConfigError("No usable vector to fit the reducer on (empty or non-finite sample).")
        reducer = make_reducer(spec.reducer)
        n_out = getattr(reducer, "n_components", None)
        if isinstance(n_out, int) and n_out > X.shape[1]:
            raise ConfigError(f"Reducer {spec.reducer} asks for {n_out} dimensions but the "
                              f"vectors have {X.shape[1]}.")
        ispec = replace(spec.build, reducer=spec.reducer, store=spec.store,
                        encoder_name=self.encoders.get(spec.build).name if spec.encoder else None)
        try:
            self._open_builder(ispec, X)  # payload indexes declared at creation: built with it
        except ValueError as exc:
            if isinstance(exc, SlimvecError):
                raise
            raise ConfigError(f"Cannot fit {spec.reducer} on {len(X)} vectors of dimension "
                              f"{X.shape[1]}: {exc}. Send a larger sample or raise fit_after.") from exc


def read_pending(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``pending.jsonl`` (an index collecting its fit sample), in order."""
    return read_jsonl_nofollow(path)
