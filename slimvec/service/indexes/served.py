"""One index as the service serves it: opened through its builder (writer lock held), its
state (:class:`~slimvec.service.indexes.index_state.IndexState`), reads, writes and the supervisor that
reopens a dead writer. Collecting the fit sample of an index created without one is
:class:`~slimvec.service.indexes.served_pending.PendingRows`'s part."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import ConfigError, SlimvecError
from slimvec.ids import doc_ids
from slimvec.index.folder import Index, open_index
from slimvec.index.locking import IndexLock
from slimvec.index.manifest import MANIFEST
from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.writer import VectorBatch
from slimvec.service.indexes.encoders import Encoders
from slimvec.service.indexes.index_state import Busy, IndexState, WriteResult
from slimvec.service.indexes.names import index_folder
from slimvec.service.indexes.pending import Journal, PendingSearch
from slimvec.service.indexes.served_pending import PENDING, PENDING_DIR, PendingRows
from slimvec.service.indexes.spec import SERVICE_SPEC, ServiceSpec
from slimvec.service.indexes.writer import IndexWriter, LiveIndex, LockedStore, WriterClosed
from slimvec.sources.checks import truncation_rejects
from slimvec.sources.given import check_docs, check_vectors

__all__ = ["ServedIndex"]

log = logging.getLogger(__name__)


class ServedIndex(PendingRows):
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
        self.state = IndexState.CLOSED
        self.busy_reason = ""
        self.index: Index | None = None
        self.writer: IndexWriter | None = None
        #: while a job writes (``busy``): the index as it was at its last commit before the job,
        #: opened read-only, so searches keep answering (stores read without a lock: FAISS,
        #: hnswlib; a Qdrant store's files are taken by the job's writer, so those searches wait)
        self.reader: Index | None = None
        #: the creation spec while the index collects its fit sample (None once served from
        #: its folder: the manifest says how it was built)
        self.spec: ServiceSpec | None = None
        self.pending_rows = 0
        self._pending_lock: IndexLock | None = None
        self._pending_search = PendingSearch(self._pending_vectors)
        self._journal = Journal(self.pending_dir / PENDING)
        self.lock = threading.RLock()
        self._closing = threading.Event()  # stops the dead writer's supervisor

    # ------------------------------------------------------------------ open / close
    def open(self) -> ServedIndex:
        """Open the index through its builder (lock held), or its pending state."""
        with self.lock:
            try:
                if (self.folder / MANIFEST).exists():
                    self._open_builder(None, None)
                    if (self.pending_dir / PENDING).exists():  # crashed between fit and commit,
                        self._lock_pending()                     # or a job built the index
                        self.spec = ServiceSpec.load(self.pending_dir / SERVICE_SPEC)
                        self._flush_pending()
                else:
                    self._lock_pending()
                    self.spec = ServiceSpec.load(self.pending_dir / SERVICE_SPEC)
                    self.pending_load()  # read once: later reads answer from memory
                    self.state = IndexState.PENDING
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
        from slimvec.index.folder import read_manifest
        from slimvec.service.indexes.stores import store_allowed

        try:
            store = read_manifest(self.folder).store
        except SlimvecError:
            return None  # the builder reports the broken manifest
        return store if store_allowed(store, self.allow_stores) else None

    def _open_builder(self, spec: IndexSpec | None, X: np.ndarray | None) -> None:
        sample = None if X is None else np.asarray(X, dtype=np.float32)  # create_from_sample's
        live = IndexBuilder.open_writer(  # reopen (spec None) or create, fit and commit at once
            self.folder, spec, fit=sample,
            trust_store=self._trusted_store() if spec is None else None)
        b = live.builder
        rw = threading.RLock()
        self.index = LiveIndex(self.folder, b.manifest, b.reducer, LockedStore(b.store, rw), rw)
        self.writer = IndexWriter(live, rw, on_commit=self.index.committed,
                                  on_dead=self._writer_died)
        self.state = IndexState.READY
        if b.manifest is not None and b.manifest.encoder:
            self.encoders.get(IndexSpec.reopen(b.manifest))

    def _writer_died(self, exc: BaseException) -> None:
        """The writer thread died (store closed): reopen the index in the background."""
        self._closing.clear()
        threading.Thread(target=self._supervise, daemon=True,
                         name=f"supervise:{self.name}").start()

    def _supervise(self) -> None:
        """Reopen a dead writer every 0.5 s doubling to 30 s until it opens or the index is
        closed; meanwhile the index is ``degraded`` (reads and writes 503: its store is closed)."""
        from slimvec.service.indexes.writer import RETRY_FIRST, RETRY_MAX

        dead, delay = self.writer, RETRY_FIRST
        while dead is not None:
            dead.next_retry = time.time() + delay
            if self._closing.wait(delay):
                return
            with self.lock:
                if self.writer is not dead or self.state != IndexState.READY:
                    return  # closed, deleted or suspended meanwhile
                dead.retries += 1
                try:
                    self._open_builder(None, None)
                except Exception as exc:  # noqa: BLE001 - still degraded: retry later
                    self.writer, self.state = dead, IndexState.READY
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
                    self._journal.flush()  # writes answered without waiting: fsynced now
                    self._pending_lock.release()
                    self._pending_lock = None
                if self.state != IndexState.BUSY:
                    self.state = IndexState.CLOSED

    def serve_read_only(self) -> None:
        """Close the writer and its lock (a rebuild reads under a shared lock; writes answer 503
        meanwhile) and serve searches from the index opened read-only: a store read without a lock
        (FAISS, hnswlib) opens before the writer closes, a Qdrant store after (searches wait on ``self.lock``)."""
        from slimvec.connectors import store_class

        trust = self._trusted_store()
        with self.lock:
            store = self.ready_index().manifest.store
            ro = None if store_class(store).needs_reader_lock(store) else open_index(self.folder, trust_store=trust)
            writer, self.writer, self.index = self.writer, None, ro
            try:
                if writer is not None:
                    writer.close()  # commits queued writes; the builder closes the store
            finally:
                if ro is None:
                    self.index = open_index(self.folder, trust_store=trust)
                self.state = IndexState.READY

    # ------------------------------------------------------------------ reads
    def ready_index(self) -> Index:
        """The open :class:`Index`, or :class:`Busy` saying why there is none."""
        w = self.writer
        if self.state == IndexState.READY and w is not None and w.dead is not None:
            raise w.dead_error()  # its store is closed until the supervisor reopens it
        if self.state == IndexState.READY and self.index is None:
            with self.lock:  # a switch of readers (a rebuild's start) holds it: wait, not 409
                pass
        if self.state == IndexState.READY and self.index is not None:
            return self.index
        if self.state == IndexState.BUSY and self.reader is not None:
            return self.reader  # reads never wait for the job: its last commit before it
        if self.state == IndexState.BUSY:
            raise Busy(f"Index {self.name!r} is being written by {self.busy_reason}; retry when it "
                       "finishes.")
        if self.state == IndexState.PENDING:
            raise Busy(f"Index {self.name!r} has no fitted reducer yet: {self.pending_rows} of "
                       f"{self.spec.fit_after if self.spec else '?'} documents collected (it is fitted when "
                       "that many have arrived).")
        raise Busy(f"Index {self.name!r} is closed.")

    def embed(self, texts: Sequence[str] | None, vectors: Any) -> np.ndarray:
        """Full query vectors from texts (through the dynamic batcher) or given vectors."""
        if self.state == IndexState.PENDING:
            return self._embed_pending(texts, vectors)
        index = self.ready_index()
        if texts is not None:
            if not index.manifest.encoder:
                raise ConfigError(f"Index {self.name!r} was built from vectors and has no encoder: "
                                  "send query vectors instead of texts.")
            return self.encoders.batcher(IndexSpec.reopen(index.manifest)).encode(list(texts))
        return index.embed(np.asarray(vectors, dtype=np.float32))


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
            if self.state == IndexState.READY and self.index is not None and w is not None and w.dead:
                m = self.index.manifest  # its store is closed until the writer is reopened
                out = {"count": int(m.count), "encoder": m.encoder, "store": m.store}
            elif self.state == IndexState.READY and self.index is not None:
                out = self.index.info()
            elif self.state == IndexState.BUSY and self.reader is not None:
                out = self.reader.info()
                out["reads"] = ("the index as its writer writes it, from its last commit on"
                                if self.reader is self.index
                                else f"its last commit before {self.busy_reason}")
            else:
                spec = self.spec
                out = {"index": self.folder.name, "count": 0,
                       "encoder": spec.encoder if spec else None,
                       "reducer": spec.reducer if spec else None,
                       "store": spec.store if spec else None,
                       "recipe": spec.recipe if spec else None,
                       "metric": spec.build.metric if spec else None, **(spec.build.encoding if spec else {})}
                out["pending"] = self.pending_rows
                if self.state == IndexState.PENDING and spec is not None:
                    out["fit_after"] = spec.fit_after
            # the folder relative to the served root: a client never learns the server's layout
            out.update(index=self.folder.name, name=self.name, state=self.health())
            if w is not None and (w.degraded or w.dead) is not None:
                out.update(last_error=w.last_error, retries=w.retries,
                           next_retry=_iso(w.next_retry))
            return out

    def health(self) -> IndexState:
        """``state``, or ``degraded`` while a ready index's writer retries a failed commit
        (searches answer, writes get 503 until the writer is back)."""
        w = self.writer
        if self.state == IndexState.READY and w is not None and (w.degraded or w.dead) is not None:
            return IndexState.DEGRADED
        return self.state

    # ------------------------------------------------------------------ writes
    def add_documents(self, docs: list[dict[str, Any]], source: str) -> tuple[WriteResult, Any]:
        """Validate, encode and queue documents; returns the result and a future (or None)."""
        with self.lock:
            if self.state == IndexState.PENDING:
                return self._add_pending(docs, "text", source)
            index = self.ready_index()
            if not index.manifest.encoder:
                raise ConfigError(f"Index {self.name!r} was built from vectors and has no encoder: "
                                  "add vectors (POST /indexes/NAME/vectors) instead of documents.")
        good, rejects, changed = check_docs(docs, source)
        result = WriteResult(rejected=[r.to_json() for r in rejects])
        encoder = self.encoders.get(IndexSpec.reopen(index.manifest))
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
            if self.state == IndexState.PENDING:
                return self._add_pending(items, "vector", source)
            index = self.ready_index()
        good, vecs, rejects, payloads, changed = check_vectors(items, index.dim_in, source)
        ids = doc_ids([items[i]["id"] for i in good])
        batch = VectorBatch(ids, vecs, payloads, rejects + changed, 0, good, [None] * len(good),
                            source)
        return WriteResult(accepted=len(good), rejected=[r.to_json() for r in rejects],
                           warnings=[w.to_json() for w in changed]), \
            self._submit(batch, len(items))

    def _submit(self, batch: VectorBatch, rows: int) -> Any:
        with self.lock:
            if self.state == IndexState.BUSY:
                raise Busy(f"Index {self.name!r} is being written by {self.busy_reason}; searches "
                           "answer meanwhile, writes are taken when it finishes: retry then.")
            self.ready_index()
            if self.writer is None:
                raise WriterClosed(f"Index {self.name!r} has no writer; retry later.")
            fut = self.writer.submit(batch, rows)
        n_ok, n_bad = len(batch.ids), sum(not r.kept for r in batch.rejects)
        fut.add_done_callback(lambda f: f.exception() or self._on_commit(self.name, n_ok, n_bad))
        return fut



def _iso(epoch: float | None) -> str | None:
    """An epoch time as ISO 8601 UTC (``None`` stays ``None``)."""
    from datetime import datetime

    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")
