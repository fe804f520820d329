"""The indexes a service serves: opened once, each with its writer lock, store and writer.

Every folder under the root holding ``manifest.json`` is an index, opened through an
:class:`~slimvec.indexer.builder.IndexBuilder` that holds its writer lock while the service serves
it (so a CLI ingest cannot write under it). An index created over HTTP without a fit sample lives
in ``ROOT/.pending/NAME`` (``service.json`` and its documents, fsynced, in ``pending.jsonl``) until
``fit_after`` documents have arrived; then the builder creates the index folder and the documents
are written and committed. A job suspends the index (commit, close, unlock), runs
:func:`slimvec.indexer.pipeline.ingest`, and reopens it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from slimvec.buildspec import DEFAULTS
from slimvec.errors import ConfigError, IndexBusyError, SlimvecError, StoreError
from slimvec.ids import doc_ids, text_key
from slimvec.indexer.checks import most_common_length, split_bad_vectors, truncation_rejects
from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.index import Index
from slimvec.indexer.keepfull import check_keep_full
from slimvec.indexer.locking import IndexLock
from slimvec.indexer.manifest import MANIFEST
from slimvec.indexer.rowcheck import RowProblem, check_payload, safe_text
from slimvec.indexer.sources import Document, Reject
from slimvec.indexer.writer import REJECTS, VectorBatch
from slimvec.reducers import make_reducer
from slimvec.service.batching import QueryBatcher
from slimvec.service.names import check_name, index_folder
from slimvec.service.pending import PendingSearch
from slimvec.service.writer import (SERVICE_INPUT, IndexWriter, LiveIndex, LockedStore,
                                    WriterClosed)

__all__ = ["Registry", "ServedIndex", "IndexSpecIn", "NotFound", "Busy", "WriteResult"]

log = logging.getLogger(__name__)
SERVICE_SPEC = "service.json"
PENDING = "pending.jsonl"
#: ROOT/.pending/NAME holds an index created over HTTP until its reducer is fitted (the index
#: folder itself is created by IndexBuilder, which refuses folders holding files it did not write)
PENDING_DIR = ".pending"


class NotFound(SlimvecError, LookupError):
    """No index of that name."""


class Busy(IndexBusyError):
    """The index cannot serve this now (a job writes it, or its reducer is not fitted yet)."""


@dataclass
class IndexSpecIn:
    """How to create an index over HTTP (mirrors ``slimvec ingest`` options)."""

    reducer: str = DEFAULTS["reducer"]
    store: str = DEFAULTS["store"]
    encoder: str | None = "minilm"
    keep_full: str | None = None
    fit_after: int = 1000
    #: canonical recipe string (reducer, store and keep_full agree with it) or None
    recipe: str | None = None

    @classmethod
    def from_request(cls, *, recipe: str | None, reducer: str | None, store: str | None,
                     keep_full: str | None, encoder: str | None, fit_after: int,
                     default_recipe: str | None) -> "IndexSpecIn":
        """What a create request asks for, as ``slimvec ingest`` reads its options: a request
        naming none of recipe, reducer, store, keep_full gets the service's default recipe
        (``slimvec serve --recipe``); a recipe with separate options that disagree is refused."""
        from slimvec.recipe import merge_recipe, parse_recipe, recipe_or_default

        recipe = recipe_or_default(recipe, reducer, store, keep_full, default_recipe)
        if recipe is None:
            return cls(reducer=reducer or DEFAULTS["reducer"], store=store or DEFAULTS["store"],
                       encoder=encoder, keep_full=keep_full, fit_after=fit_after)
        # a recipe is a string here, never a file on the server's disk (the operator's --recipe
        # default was resolved to its string when the server started)
        rec = merge_recipe(parse_recipe(recipe), reducer, store, keep_full, option="recipe")
        return cls(reducer=rec.reducer, store=rec.store, encoder=encoder, keep_full=rec.keep_full,
                   fit_after=fit_after, recipe=str(rec))


@dataclass
class WriteResult:
    """What one write request did."""

    accepted: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    committed: bool = False
    pending_fit: bool = False


class Encoders:
    """One encoder (and one query batcher) per encoder spec, loaded once."""

    def __init__(self, wait_ms: float, max_batch: int,
                 on_batch: Callable[[int], None] | None = None) -> None:
        self.wait_ms, self.max_batch, self.on_batch = wait_ms, max_batch, on_batch
        self._enc: dict[str, Any] = {}
        self._batchers: dict[str, QueryBatcher] = {}
        self._lock = threading.Lock()

    def get(self, spec: str) -> Any:
        """The loaded encoder of ``spec``."""
        with self._lock:
            if spec not in self._enc:
                from slimvec.indexer.encoder import Encoder

                self._enc[spec] = Encoder(spec, batch_size=64)
                self._batchers[spec] = QueryBatcher(self._enc[spec].encode, self.wait_ms,
                                                    self.max_batch, self.on_batch)
            return self._enc[spec]

    def batcher(self, spec: str) -> QueryBatcher:
        """The query batcher of ``spec``."""
        self.get(spec)
        return self._batchers[spec]

    def close(self) -> None:
        """Stop the batchers."""
        for b in self._batchers.values():
            b.close()


class ServedIndex:
    """One index as served: ``ready``, ``pending`` (not fitted yet) or ``busy`` (a job).

    ``state`` stays one of those; :meth:`health` (what clients see) says ``degraded`` while a
    ready index's writer retries a failed commit or its dead writer is being reopened."""

    def __init__(self, name: str, root: Path, encoders: Encoders,
                 on_commit: Callable[[str, int, int], None],
                 allow_stores: Sequence[str] = ()) -> None:
        self.name, self.encoders, self._on_commit = name, encoders, on_commit
        self.allow_stores = list(allow_stores)
        self.folder = index_folder(root, name)
        self.pending_dir = root / PENDING_DIR / name
        self.state = "closed"
        self.busy_reason = ""
        self.index: Index | None = None
        self.writer: IndexWriter | None = None
        #: while a job writes (``busy``): the index as it was at its last commit before the job,
        #: opened read-only, so searches keep answering (stores read without a lock: FAISS,
        #: hnswlib; a Qdrant store's files are taken by the job's writer, so those searches wait)
        self.reader: Index | None = None
        self.spec: dict[str, Any] = {}
        self.pending_rows = 0
        self._pending_lock: IndexLock | None = None
        self._pending_search = PendingSearch(self._pending_vectors)
        self.lock = threading.RLock()
        self._closing = threading.Event()  # stops the dead writer's supervisor

    # ------------------------------------------------------------------ open / close
    def open(self) -> "ServedIndex":
        """Open the index through its builder (lock held), or its pending state."""
        with self.lock:
            try:
                if (self.folder / MANIFEST).exists():
                    self._open_builder(None, None)
                    if (self.pending_dir / PENDING).exists():  # crashed between fit and commit,
                        self._lock_pending()                     # or a job built the index
                        self.spec = json.loads(
                            (self.pending_dir / SERVICE_SPEC).read_text("utf-8"))
                        self._flush_pending()
                else:
                    self._lock_pending()
                    self.spec = json.loads((self.pending_dir / SERVICE_SPEC).read_text("utf-8"))
                    self.pending_rows = _count_lines(self.pending_dir / PENDING)
                    self.state = "pending"
            except BaseException:
                self.close()
                raise
        return self

    def _lock_pending(self) -> None:
        if self._pending_lock is None:
            self._pending_lock = IndexLock(self.pending_dir, exclusive=True).acquire()

    def _trusted_store(self) -> str | None:
        """The existing manifest's store when it lies outside the folder at a location the
        operator allowed (``--allow-store``): only then is it reopened."""
        from slimvec.indexer.index import read_manifest
        from slimvec.service.stores import store_allowed

        try:
            store = read_manifest(self.folder).store
        except SlimvecError:
            return None  # the builder reports the broken manifest
        return store if store_allowed(store, self.allow_stores) else None

    def _open_builder(self, spec: IndexSpec | None, X: np.ndarray | None) -> None:
        b = IndexBuilder(self.folder, trust_store=self._trusted_store() if spec is None else None)
        b.__enter__()
        try:
            if spec is None:
                old = b.existing
                if old is None:
                    raise ConfigError(f"{self.folder} holds no index.")
                b.open(IndexSpec(encoder=old.encoder, text_column=old.text_column,
                                 id_column=old.id_column), old.dim_in)
            else:
                b.open(spec, int(X.shape[1]), fit=lambda: X)
                b.commit()  # the manifest exists from now on: a restart reopens the index
        except BaseException:
            b.__exit__(*sys.exc_info())
            raise
        rw = threading.RLock()
        self.index = LiveIndex(self.folder, b.manifest, b.reducer, LockedStore(b.store, rw), rw)
        self.writer = IndexWriter(b, rw, on_commit=self.index.committed,
                                  on_dead=self._writer_died)
        self.state = "ready"
        if b.manifest.encoder:
            self.encoders.get(b.manifest.encoder)

    def _writer_died(self, exc: BaseException) -> None:
        """The writer thread died (store closed): reopen the index in the background."""
        self._closing.clear()
        threading.Thread(target=self._supervise, daemon=True,
                         name=f"supervise:{self.name}").start()

    def _supervise(self) -> None:
        """Reopen a dead writer every 0.5 s doubling to 30 s until it opens or the index is
        closed; meanwhile the index is ``degraded`` (reads and writes 503: its store is closed)."""
        from slimvec.service.writer import RETRY_FIRST, RETRY_MAX

        dead, delay = self.writer, RETRY_FIRST
        while dead is not None:
            dead.next_retry = time.time() + delay
            if self._closing.wait(delay):
                return
            with self.lock:
                if self.writer is not dead or self.state != "ready":
                    return  # closed, deleted or suspended meanwhile
                dead.retries += 1
                try:
                    self._open_builder(None, None)
                except Exception as exc:  # noqa: BLE001 - still degraded: retry later
                    self.writer, self.state = dead, "ready"
                    dead.last_error = str(exc).splitlines()[0][:300] or type(exc).__name__
                    delay = min(delay * 2, RETRY_MAX)
                    log.warning("%s: reopening the dead writer failed (attempt %d: %s); next "
                                "attempt in %.1f s", self.name, dead.retries, dead.last_error,
                                delay)
                    continue
            log.warning("%s: the writer was reopened after %d attempt(s); the index is ready",
                        self.name, dead.retries)
            return

    def close(self) -> None:
        """Commit queued writes, finish, close the store, release the locks (idempotent)."""
        self._closing.set()
        with self.lock:
            reader, self.reader = self.reader, None
            if reader is not None and reader is not self.index:  # a job's: the writer closes it
                reader.close()
            try:
                if self.writer is not None:
                    self.writer.close()  # the builder closes the store and the full vectors
            finally:
                self.writer, self.index = None, None
                if self._pending_lock is not None:
                    self._pending_lock.release()
                    self._pending_lock = None
                if self.state != "busy":
                    self.state = "closed"

    # ------------------------------------------------------------------ reads
    def ready_index(self) -> Index:
        """The open :class:`Index`, or :class:`Busy` saying why there is none."""
        w = self.writer
        if self.state == "ready" and w is not None and w.dead is not None:
            raise w.dead_error()  # its store is closed until the supervisor reopens it
        if self.state == "ready" and self.index is not None:
            return self.index
        if self.state == "busy" and self.reader is not None:
            return self.reader  # reads never wait for the job: its last commit before it
        if self.state == "busy":
            raise Busy(f"Index {self.name!r} is being written by {self.busy_reason}; retry when it "
                       "finishes.")
        if self.state == "pending":
            raise Busy(f"Index {self.name!r} has no fitted reducer yet: {self.pending_rows} of "
                       f"{self.spec.get('fit_after')} documents collected (it is fitted when "
                       "that many have arrived).")
        raise Busy(f"Index {self.name!r} is closed.")

    def embed(self, texts: Sequence[str] | None, vectors: Any) -> np.ndarray:
        """Full query vectors from texts (through the dynamic batcher) or given vectors."""
        if self.state == "pending":
            return self._embed_pending(texts, vectors)
        index = self.ready_index()
        if texts is not None:
            if not index.manifest.encoder:
                raise ConfigError(f"Index {self.name!r} was built from vectors and has no encoder: "
                                  "send query vectors instead of texts.")
            return self.encoders.batcher(index.manifest.encoder).encode(list(texts))
        return index.embed(np.asarray(vectors, dtype=np.float32))

    def _embed_pending(self, texts: Sequence[str] | None, vectors: Any) -> np.ndarray:
        encoder = self.spec.get("encoder")
        if texts is not None:
            if not encoder:
                raise ConfigError(f"Index {self.name!r} is built from vectors and has no encoder: "
                                  "send query vectors instead of texts.")
            return self.encoders.batcher(encoder).encode(list(texts))
        vecs = np.asarray(vectors, dtype=np.float32)
        dim = self.spec.get("dim_in") or (self.encoders.get(encoder).dim if encoder else None)
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
            if self.state != "pending":
                return None
            self._pending_search.sync(_read_pending(self.pending_dir / PENDING))
            ids, scores = self._pending_search.search(queries, k, allowed)
            return ids, scores, self._pending_search.payloads

    def pending_view(self) -> PendingSearch | None:
        """The pending rows (payloads, vectors, count) while the index collects its fit sample,
        in step with ``pending.jsonl``; None once it has a fitted reducer."""
        with self.lock:
            if self.state != "pending":
                return None
            self._pending_search.sync(_read_pending(self.pending_dir / PENDING))
            return self._pending_search

    def pending_view_reset(self) -> None:
        """Forget the cached pending rows (``pending.jsonl`` was rewritten by a change)."""
        self._pending_search = PendingSearch(self._pending_vectors)

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
            if self.state != "pending":
                raise ConflictError(f"Index {self.name!r} is {self.state}, not collecting its fit "
                                    "sample: there is nothing to fit.")
            rows = _read_pending(self.pending_dir / PENDING)
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
                self.state = "pending"
            raise
        self._flush_pending(rows)

    def calibrate(self, queries: np.ndarray) -> Any:
        """Calibrate the ``rescore=auto`` depth on full query vectors through the writer (between
        its commits); returns the new ``RescoreInfo``.

        Raises
        ------
        ConfigError
            The index's recipe is not ``rescore=auto``, or it holds too few vectors.
        Busy
            The index is not ready (pending its fit, or written by a job).
        """
        index = self.ready_index()
        if not index.manifest.auto_rescore:
            raise ConfigError(f"Index {self.name!r} has recipe {index.manifest.recipe!r}, not a "
                              "rescore=auto recipe: there is no calibrated depth to measure; "
                              "search with 'rescore' instead.")
        if self.writer is None:
            raise Busy(f"Index {self.name!r} has no writer open; retry later.")
        return self.writer.calibrate(queries).result()

    def info(self) -> dict[str, Any]:
        """The fields of ``slimvec info --json`` (plus ``name`` and ``state``); ``index`` is the
        folder relative to the root, never an absolute server path."""
        with self.lock:
            w = self.writer
            if self.state == "ready" and self.index is not None and w is not None and w.dead:
                m = self.index.manifest  # its store is closed until the writer is reopened
                out = {"count": int(m.count), "encoder": m.encoder, "store": m.store}
            elif self.state == "ready" and self.index is not None:
                out = self.index.info()
            elif self.state == "busy" and self.reader is not None:
                out = self.reader.info()
                out["reads"] = ("the index as its writer writes it, from its last commit on"
                                if self.reader is self.index
                                else f"its last commit before {self.busy_reason}")
            else:
                out = {"index": self.folder.name, "count": 0, "encoder": self.spec.get("encoder"),
                       "reducer": self.spec.get("reducer"), "store": self.spec.get("store"),
                       "recipe": self.spec.get("recipe")}
                out["pending"] = self.pending_rows
                if self.state == "pending":
                    out["fit_after"] = self.spec.get("fit_after")
            # the folder relative to the served root: a client never learns the server's layout
            out.update(index=self.folder.name, name=self.name, state=self.health())
            if w is not None and (w.degraded or w.dead) is not None:
                out.update(last_error=w.last_error, retries=w.retries,
                           next_retry=_iso(w.next_retry))
            return out

    def health(self) -> str:
        """``state``, or ``degraded`` while a ready index's writer retries a failed commit
        (searches answer, writes get 503 until the writer is back)."""
        w = self.writer
        if self.state == "ready" and w is not None and (w.degraded or w.dead) is not None:
            return "degraded"
        return self.state

    # ------------------------------------------------------------------ writes
    def add_documents(self, docs: list[dict[str, Any]], source: str) -> tuple[WriteResult, Any]:
        """Validate, encode and queue documents; returns the result and a future (or None)."""
        with self.lock:
            if self.state == "pending":
                return self._add_pending(docs, "text", source), None
            index = self.ready_index()
            if not index.manifest.encoder:
                raise ConfigError(f"Index {self.name!r} was built from vectors and has no encoder: "
                                  "add vectors (POST /indexes/NAME/vectors) instead of documents.")
        good, rejects, changed = _check_docs(docs, source)
        result = WriteResult(rejected=[r.to_json() for r in rejects])
        encoder = self.encoders.get(index.manifest.encoder)
        warnings = changed + (truncation_rejects(encoder, good, source, "text") if good else [])
        result.warnings = [w.to_json() for w in warnings]
        vecs = encoder.encode([d.text for d in good]) if good else np.zeros((0, index.dim_in), np.float32)
        ids = doc_ids([d.id for d in good])
        payloads = [{**d.payload, "text": d.text, "source_id": d.id} for d in good]
        batch = VectorBatch(ids, vecs, payloads, rejects + warnings, 0, [d.row for d in good],
                            [None] * len(good), source)
        result.accepted = len(good)
        return result, self._submit(batch, len(docs))

    def add_vectors(self, items: list[dict[str, Any]], source: str) -> tuple[WriteResult, Any]:
        """Validate and queue vectors with ids; returns the result and a future (or None)."""
        with self.lock:
            if self.state == "pending":
                return self._add_pending(items, "vector", source), None
            index = self.ready_index()
        good, vecs, rejects, payloads, changed = _check_vectors(items, index.dim_in, source)
        ids = doc_ids([items[i]["id"] for i in good])
        batch = VectorBatch(ids, vecs, payloads, rejects + changed, 0, good, [None] * len(good),
                            source)
        return WriteResult(accepted=len(good), rejected=[r.to_json() for r in rejects],
                           warnings=[w.to_json() for w in changed]), \
            self._submit(batch, len(items))

    def _submit(self, batch: VectorBatch, rows: int) -> Any:
        with self.lock:
            if self.state == "busy":
                raise Busy(f"Index {self.name!r} is being written by {self.busy_reason}; searches "
                           "answer meanwhile, writes are taken when it finishes: retry then.")
            self.ready_index()
            if self.writer is None:
                raise WriterClosed(f"Index {self.name!r} has no writer; retry later.")
            fut = self.writer.submit(batch, rows)
        n_ok, n_bad = len(batch.ids), sum(not r.kept for r in batch.rejects)
        fut.add_done_callback(lambda f: f.exception() or self._on_commit(self.name, n_ok, n_bad))
        return fut

    # ------------------------------------------------------------------ fit on arrival
    def _add_pending(self, rows: list[dict[str, Any]], kind: str, source: str) -> WriteResult:
        encoder = self.spec.get("encoder")
        if kind == "text" and not encoder:
            raise ConfigError(f"Index {self.name!r} has no encoder: add vectors, not documents.")
        if kind == "vector" and encoder:
            raise ConfigError(f"Index {self.name!r} encodes texts with {encoder}: add documents "
                              "(its reducer is fitted on its encoder's vectors).")
        if kind == "text":
            good_docs, rejects, changed = _check_docs(rows, source)
            lines = [{"id": d.id, "text": d.text, "payload": d.payload} for d in good_docs]
        else:
            dim = self.spec.get("dim_in")
            if dim is None:  # the first vectors of the index: their dimension is its dimension
                dim = _common_dim(rows)
                self.spec["dim_in"] = dim
                from slimvec.persistence import write_json_atomic

                write_json_atomic(self.pending_dir / SERVICE_SPEC, self.spec)  # kept on restart
            good, vecs, rejects, payloads, changed = _check_vectors(rows, dim, source)
            lines = [{"id": rows[i]["id"], "vector": vecs[j].tolist(),
                      "payload": {k: v for k, v in payloads[j].items() if k != "source_id"}}
                     for j, i in enumerate(good)]
        _append_fsync(self.pending_dir / REJECTS,
                      [json.dumps(r.to_json()) for r in rejects + changed])
        _append_fsync(self.pending_dir / PENDING, [json.dumps(x, ensure_ascii=False) for x in lines])
        self.pending_rows += len(lines)
        result = WriteResult(accepted=len(lines), rejected=[r.to_json() for r in rejects],
                             warnings=[w.to_json() for w in changed], committed=True,
                             pending_fit=True)
        if self.pending_rows >= int(self.spec.get("fit_after", 1)):
            self._fit_and_flush(_read_pending(self.pending_dir / PENDING))
            result.pending_fit = False
        return result

    def _pending_vectors(self, rows: list[dict[str, Any]]) -> np.ndarray:
        if self.spec.get("encoder"):
            return self.encoders.get(self.spec["encoder"]).encode([r["text"] for r in rows])
        return np.asarray([r["vector"] for r in rows], dtype=np.float32)

    def _flush_pending(self, rows: list[dict[str, Any]] | None = None) -> None:
        """Write the collected rows (and their rejects) into the fitted index, commit, clean up."""
        if rows is None:
            rows = _read_pending(self.pending_dir / PENDING)
        if rows:
            vecs = self._pending_vectors(rows)
            payloads = [{**r.get("payload", {}), "source_id": r["id"],
                         **({"text": r["text"]} if "text" in r else {})} for r in rows]
            batch = VectorBatch(doc_ids([r["id"] for r in rows]), vecs, payloads, [], 0,
                                list(range(len(rows))), [None] * len(rows), SERVICE_INPUT)
            self._submit(batch, len(rows)).result()
        pending_rejects = self.pending_dir / REJECTS
        if pending_rejects.exists():
            _append_fsync(self.folder / REJECTS, pending_rejects.read_text("utf-8").splitlines())
        if self._pending_lock is not None:
            self._pending_lock.release()
            self._pending_lock = None
        shutil.rmtree(self.pending_dir, ignore_errors=True)
        self.pending_rows = 0

    def create_from_sample(self, X: np.ndarray) -> None:
        """Fit the reducer on ``X`` and create the index through :class:`IndexBuilder`."""
        spec = self.spec
        X = np.asarray(X, dtype=np.float32)
        X = X[np.isfinite(X).all(axis=1)] if X.ndim == 2 else X
        if X.ndim != 2 or not len(X):
            raise ConfigError("No usable vector to fit the reducer on (empty or non-finite sample).")
        reducer = make_reducer(spec["reducer"])
        n_out = getattr(reducer, "n_components", None)
        if isinstance(n_out, int) and n_out > X.shape[1]:
            raise ConfigError(f"Reducer {spec['reducer']} asks for {n_out} dimensions but the "
                              f"vectors have {X.shape[1]}.")
        encoder = spec.get("encoder")
        ispec = IndexSpec(reducer=spec["reducer"], store=spec["store"], encoder=encoder,
                          keep_full=spec.get("keep_full"), text_column="text" if encoder else None,
                          id_column="id" if encoder else None, source=SERVICE_INPUT,
                          encoder_name=self.encoders.get(encoder).name if encoder else None,
                          recipe=spec.get("recipe"))
        try:
            self._open_builder(ispec, X)
            if spec.get("payload_index"):  # declared at creation: built now that it is fitted
                from slimvec.service.payload_indexes import build_declared_indexes

                build_declared_indexes(self)
        except ValueError as exc:
            if isinstance(exc, SlimvecError):
                raise
            raise ConfigError(f"Cannot fit {spec['reducer']} on {len(X)} vectors of dimension "
                              f"{X.shape[1]}: {exc}. Send a larger sample or raise fit_after.") from exc


class Registry:
    """Every index under the root, by name."""

    def __init__(self, root: Path, encoders: Encoders,
                 on_commit: Callable[[str, int, int], None] | None = None,
                 allow_stores: Sequence[str] = ()) -> None:
        self.root = root
        #: store locations outside the index folders that requests may name (--allow-store)
        self.allow_stores = list(allow_stores)
        self.encoders = encoders
        self._on_commit = on_commit or (lambda name, n, bad: None)
        self._indexes: dict[str, ServedIndex] = {}
        self._lock = threading.Lock()
        self.errors: dict[str, str] = {}

    def open_all(self, skip: set[str] = frozenset()) -> None:
        """Open every index folder under the root (those in ``skip`` are left to their jobs)."""
        for folder in sorted(self.root.iterdir()):
            if not folder.is_dir() or folder.name.startswith(".") or folder.name in skip:
                continue
            if not (folder / MANIFEST).exists():
                continue
            try:
                check_name(folder.name)
                self.open(folder.name)
            except SlimvecError as exc:
                log.error("cannot serve %s: %s", folder, exc)
                self.errors[folder.name] = str(exc)
        pending = self.root / PENDING_DIR
        for folder in sorted(pending.iterdir()) if pending.is_dir() else []:
            if folder.name in skip or folder.name in self._indexes:
                continue
            try:
                check_name(folder.name)
                self.open(folder.name)
            except SlimvecError as exc:
                log.error("cannot serve %s: %s", folder, exc)
                self.errors[folder.name] = str(exc)

    def open(self, name: str) -> ServedIndex:
        """Open (or reopen) index ``name``."""
        served = ServedIndex(name, self.root, self.encoders, self._on_commit, self.allow_stores)
        served.open()
        with self._lock:
            self._indexes[name] = served
        self.errors.pop(name, None)
        return served

    def get(self, name: str) -> ServedIndex:
        """The served index ``name`` or :class:`NotFound`."""
        check_name(name)
        with self._lock:
            served = self._indexes.get(name)
        if served is None:
            raise NotFound(f"No index named {name!r} under the served root"
                           + (f" (it failed to open: {self.errors[name]})" if name in self.errors
                              else "") + ". List them with GET /indexes.")
        return served

    def check_store(self, spec: str | None) -> None:
        """Refuse (403) a requested store outside the index folder unless the operator allowed
        its location; see :mod:`slimvec.service.stores`."""
        from slimvec.service.stores import check_store_allowed

        if spec:
            check_store_allowed(spec, self.allow_stores)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._indexes)

    def create(self, name: str, spec: IndexSpecIn, sample: np.ndarray | None = None,
               sample_texts: list[str] | None = None) -> tuple[ServedIndex, bool]:
        """Create index ``name``; returns it and whether it is new (409 on other specs)."""
        from slimvec.connectors import canonical_store_spec, store_dim_problem
        from slimvec.indexer.encoder import resolve_model

        folder = index_folder(self.root, name)
        self.check_store(spec.store)  # before anything could connect to or write at it
        n_out = getattr(make_reducer(spec.reducer), "n_components", None)
        store_spec = canonical_store_spec(spec.store)
        if isinstance(n_out, int) and (problem := store_dim_problem(store_spec, n_out)):
            raise ConfigError(f"{problem}. Choose a reducer size and a store spec that fit together.")
        check_keep_full(spec.keep_full)
        if spec.encoder:
            resolve_model(spec.encoder)
        with self._lock:
            existing = self._indexes.get(name)
            if existing is None and (folder.exists() or (self.root / PENDING_DIR / name).exists()):
                raise Busy(f"{name!r} exists under the root but is not served (a job, or a folder "
                           "that is not an index); choose another name.")
            if existing is None:
                placeholder = ServedIndex(name, self.root, self.encoders, self._on_commit, self.allow_stores)
                placeholder.state = "busy"
                placeholder.busy_reason = "its creation"
                self._indexes[name] = placeholder
        if existing is not None:
            info = existing.info()
            same = (info.get("store") == store_spec and info.get("encoder") == spec.encoder
                    and str(info.get("reducer")) in (spec.reducer, make_reducer(spec.reducer).spec)
                    and info.get("recipe") == spec.recipe)
            if not same:
                raise ConflictError(f"Index {name!r} already exists with reducer {info.get('reducer')!r}, "
                                    f"store {info.get('store')!r}, encoder {info.get('encoder')!r}, "
                                    f"recipe {info.get('recipe')!r}; delete it first or choose another "
                                    "name.")
            return existing, False
        served = ServedIndex(name, self.root, self.encoders, self._on_commit, self.allow_stores)
        served.spec = {"reducer": spec.reducer, "store": store_spec, "encoder": spec.encoder,
                       "keep_full": spec.keep_full, "fit_after": int(spec.fit_after),
                       "recipe": spec.recipe}
        try:
            if sample_texts:
                if not spec.encoder:
                    raise ConfigError("sample_texts needs an encoder; send sample_vectors.")
                sample = self.encoders.get(spec.encoder).encode(sample_texts)
            if sample is not None:
                with served.lock:
                    served.create_from_sample(sample)
            else:
                from slimvec.persistence import write_json_atomic

                served.pending_dir.mkdir(parents=True)
                write_json_atomic(served.pending_dir / SERVICE_SPEC, served.spec)
                served.open()
        except BaseException:
            with self._lock:
                self._indexes.pop(name, None)
            try:
                served.close()
            finally:
                shutil.rmtree(served.pending_dir, ignore_errors=True)
                if not (folder / MANIFEST).exists():
                    shutil.rmtree(folder, ignore_errors=True)
            raise
        with self._lock:
            self._indexes[name] = served
        return served, True

    def delete(self, name: str) -> None:
        """Close index ``name`` and delete its folder."""
        served = self.get(name)
        with served.lock:
            if served.state == "busy":
                raise Busy(f"Index {name!r} is being written by {served.busy_reason}; delete it "
                           "when that finishes.")
            served.close()
            with self._lock:
                self._indexes.pop(name, None)
            shutil.rmtree(served.folder, ignore_errors=True)
            shutil.rmtree(served.pending_dir, ignore_errors=True)

    def suspend(self, name: str, reason: str) -> ServedIndex:
        """Close index ``name`` (committing) and mark it busy; creates a placeholder if new."""
        with self._lock:
            served = self._indexes.get(name)
            if served is None:
                served = ServedIndex(name, self.root, self.encoders, self._on_commit, self.allow_stores)
                self._indexes[name] = served
        with served.lock:
            if served.state == "busy":
                raise Busy(f"Index {name!r} is being written by {served.busy_reason}.")
            served.close()  # a pending index keeps its rows: they are written after the job
            served.state, served.busy_reason = "busy", reason
            served.reader = _job_reader(served)
        return served

    def pending_spec(self, name: str) -> dict[str, Any] | None:
        """The creation spec of index ``name`` while it collects its fit sample, else None."""
        with self._lock:
            served = self._indexes.get(name)
        return dict(served.spec) if served is not None and served.state == "pending" else None

    def resume(self, name: str) -> None:
        """Reopen index ``name`` after a job (drop it if the job created nothing)."""
        folder = index_folder(self.root, name)
        with self._lock:
            busy = self._indexes.get(name)
        reader = busy.reader if busy is not None else None
        if busy is not None:
            busy.reader = None
        if reader is not None:
            reader.close()  # before the writer reopens (nothing of the job's is in it)
        if (folder / MANIFEST).exists():
            try:
                self.open(name)  # replaces the busy placeholder
                return
            except Exception as exc:  # noqa: BLE001 - the job's thread must record its end
                log.exception("reopening %s after its job failed", folder)
                self.errors[name] = str(exc)
        with self._lock:
            self._indexes.pop(name, None)

    def close_all(self) -> None:
        """Commit and close every index."""
        for name in self.names():
            try:
                with self._lock:
                    served = self._indexes.get(name)
                if served is not None:
                    served.close()
            except Exception as exc:  # noqa: BLE001 - close the others anyway
                log.error("closing %s failed: %s", name, exc)


def _job_reader(served: ServedIndex) -> Index | None:
    """The index opened read-only for searches while a job writes it, or None: not fitted yet,
    or a store that takes its folder for the writer alone (Qdrant Edge, qdrant-client local
    mode: :meth:`~slimvec.connectors.base.VectorStore.needs_reader_lock`)."""
    from slimvec.connectors import store_class
    from slimvec.indexer.index import open_index, read_manifest

    if not (served.folder / MANIFEST).exists():
        return None
    try:
        manifest = read_manifest(served.folder)
        if store_class(manifest.store).needs_reader_lock(manifest.store):
            return None
        return open_index(served.folder, trust_store=served._trusted_store())
    except SlimvecError as exc:  # searches then answer 409 until the job ends, as before
        log.warning("%s: no read-only view during the job (%s)", served.name, exc)
        return None


class ConflictError(StoreError):
    """The request conflicts with the index's state (409)."""


# ---------------------------------------------------------------------- row checks
def _storable(payload: dict[str, Any], source: str, row: int, rejects: list[Reject],
              changed: list[Reject]) -> dict[str, Any] | None:
    """``payload`` as every store holds it (:func:`slimvec.indexer.rowcheck.check_payload`), or
    ``None`` after adding the row's reject: checked when the request arrives, so its answer lists
    the row and the writer never sees it."""
    notes: list[str] = []
    try:
        clean = check_payload(payload, notes)
    except RowProblem as bad:
        rejects.append(Reject(source, row, None, bad.field, bad.reason, bad.snippet))
        return None
    changed.extend(Reject(source, row, None, None, n, "", kept=True) for n in notes)
    return clean


def _check_docs(docs: list[dict[str, Any]], source: str
                ) -> tuple[list[Document], list[Reject], list[Reject]]:
    """Good documents (payloads made storable), rejects, and kept warnings of changed values."""
    good: list[Document] = []
    rejects: list[Reject] = []
    changed: list[Reject] = []
    for i, d in enumerate(docs):
        text = d.get("text")
        if not isinstance(text, str) or not text.strip():
            rejects.append(Reject(source, i, None, "text", "missing or empty text",
                                  safe_text(text)))
            continue
        did = d.get("id")
        if did is None or (isinstance(did, str) and not did.strip()):
            if _surrogates(text):  # the default id is the text's hash: the text must be UTF-8
                rejects.append(Reject(source, i, None, "text", "invalid UTF-8 (lone surrogate) "
                                      "in text", safe_text(text)))
                continue
            did = text_key(text)
        payload = _storable({**(d.get("payload") or {}), "text": text, "source_id": did}, source,
                            i, rejects, changed)
        if payload is None:
            continue
        payload.pop("text")
        payload.pop("source_id")
        good.append(Document(did, text, payload, row=i))
    return good, rejects, changed


def _surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _common_dim(items: list[dict[str, Any]]) -> int:
    """The most common vector length of a request (not its first row's: one malformed first row
    would make every good row a wrong-dimension reject, as issue 23 item 8 found in migrate)."""
    dim = most_common_length(len(it["vector"]) for it in items
                             if isinstance(it.get("vector"), list) and it["vector"])
    if dim is None:
        raise ConfigError("No vector in the request to tell the index's input dimension from.")
    return dim


def _check_vectors(items: list[dict[str, Any]], dim: int, source: str
                   ) -> tuple[list[int], np.ndarray, list[Reject], list[dict[str, Any]],
                              list[Reject]]:
    """Rows to write, their vectors, rejects, their storable payloads (with ``source_id``) and
    kept warnings of changed payload values."""
    rejects: list[Reject] = []
    changed: list[Reject] = []
    payloads: dict[int, dict[str, Any]] = {}
    for i, it in enumerate(items):
        p = _storable({**(it.get("payload") or {}), "source_id": it.get("id")}, source, i,
                      rejects, changed)
        if p is not None:
            payloads[i] = p
    rows = sorted(payloads)
    ok, clean, bad = split_bad_vectors([items[i].get("vector") or [] for i in rows], dim, rows,
                                       source)
    good = [i for i, g in zip(rows, ok) if g]
    rejects = sorted(rejects + bad, key=lambda r: r.row)
    return good, clean, rejects, [payloads[i] for i in good], changed


def _append_fsync(path: Path, lines: list[str]) -> None:
    if not lines:
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(x + "\n" for x in lines))
        fh.flush()
        os.fsync(fh.fileno())


def read_pending(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``pending.jsonl`` (an index collecting its fit sample), in order."""
    return _read_pending(path)


def _read_pending(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


def _iso(epoch: float | None) -> str | None:
    """An epoch time as ISO 8601 UTC (``None`` stays ``None``)."""
    from datetime import datetime, timezone

    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())
