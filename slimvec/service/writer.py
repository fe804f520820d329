"""One long-lived writer per index: requests hand it batches, it commits them in order.

This is an adapter over today's commit loop, :func:`slimvec.indexer.writer.write_batches`, run in
a thread and fed by a queue: with ``checkpoint_batches=1`` every batch the loop takes is committed
(rejects fsynced -> store flushed -> manifest) before the loop asks for the next one, so a batch is
durable once the generator is resumed after yielding it. Batches that queue up while a commit runs
are merged into one (group commit). The adapter is small on purpose so that it can switch to
``IndexBuilder.write()`` + ``commit()`` (issue 13) without touching the HTTP side.

Writes and searches share the store through :class:`LockedStore` (a Qdrant Edge shard cannot be
opened twice in one process, and its writes and reads are not documented as thread-safe).
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from slimvec.errors import StoreError
from slimvec.indexer.index import store_checksums, write_manifest
from slimvec.indexer.keepfull import KeepFullStore
from slimvec.indexer.writer import IngestSummary, VectorBatch, write_batches

__all__ = ["IndexWriter", "LockedStore", "WriterClosed"]

log = logging.getLogger(__name__)
_STOP = object()
SERVICE_INPUT = "slimvec-serve"


class WriterClosed(StoreError):
    """The writer is stopped (shutting down, deleted, or it failed)."""


class LockedStore:
    """Proxy of an opened store serialising every call through one lock."""

    def __init__(self, store: Any) -> None:
        self.inner = store
        self.lock = threading.RLock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                return attr(*args, **kwargs)

        return call


class IndexWriter:
    """The writer thread of one index.

    Parameters
    ----------
    folder : Path
        Index folder (its writer lock is held by the caller).
    manifest : dict
        The index manifest (updated in place at each commit).
    store : LockedStore
        The opened store, shared with searches; closed when the writer stops.
    reducer : Reducer
    full : FullVectors or None, keep_full : bool
        Full-vector keeping of the index (``--keep-full``).
    dim_in : int
    """

    def __init__(self, folder: Path, manifest: dict[str, Any], store: LockedStore, reducer: Any,
                 full: Any, keep_full: bool, dim_in: int) -> None:
        self.folder, self.manifest, self.store, self.reducer = folder, manifest, store, reducer
        self.target: Any = KeepFullStore(store, full, dim_in, SERVICE_INPUT) if keep_full else store
        self.summary = IngestSummary(index=str(folder), input=SERVICE_INPUT)
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None
        self._closed = False
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Mark the index as being written by the service and start the commit loop."""
        progress = self.manifest.get("progress") or {}
        next_row = int(progress.get("next_row", 0)) if progress.get("input") == SERVICE_INPUT else 0
        rejects = self.folder / "rejects.jsonl"
        self.manifest["progress"] = {
            "input": SERVICE_INPUT, "next_row": next_row, "state": "running",
            "rejects_bytes": rejects.stat().st_size if rejects.exists() else 0,
        }
        self.manifest.pop("store_sha256", None)  # store files are about to change
        write_manifest(self.folder, self.manifest)
        self._thread = threading.Thread(target=self._run, name=f"writer:{self.folder.name}",
                                        daemon=True)
        self._thread.start()

    def submit(self, batch: VectorBatch, rows: int) -> Future:
        """Queue a batch of ``rows`` source rows; the future resolves once it is committed."""
        fut: Future = Future()
        with self._lock:
            if self._closed or self._failed is not None:
                raise WriterClosed(f"{self.folder.name}: the index writer is stopped"
                                   + (f" ({self._failed})" if self._failed else "") + "; retry later.")
            self._queue.put((batch, rows, fut))
        return fut

    @property
    def depth(self) -> int:
        """Batches waiting for the commit loop."""
        return self._queue.qsize()

    def close(self, timeout: float | None = None) -> None:
        """Commit what was queued, finalize the store (state ``done``), close it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        if self._thread is not None:
            self._thread.join(timeout)

    # ---------------------------------------------------------------- the loop
    def _batches(self) -> Iterator[VectorBatch]:
        pending: list[Future] = []
        next_row = int(self.manifest["progress"]["next_row"])
        while True:
            for fut in pending:  # resumed after the loop committed the merged batch
                if not fut.done():
                    fut.set_result(next_row)
            pending = []
            item = self._queue.get()
            if item is _STOP:
                return
            items = [item]
            while True:  # group commit: take whatever queued meanwhile
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    self._queue.put(_STOP)
                    break
                items.append(more)
            batch = _merge([b for b, _, _ in items], next_row + sum(r for _, r, _ in items))
            next_row = batch.next_row
            pending = [f for _, _, f in items]
            if isinstance(self.target, KeepFullStore):
                self.target.stage(batch.ids, batch.vectors)
            self._inflight = pending
            yield batch

    def _run(self) -> None:
        self._inflight: list[Future] = []
        try:
            write_batches(self.folder, self.manifest, self.target, self.reducer, self._batches(),
                          self.summary, lambda n: None, 3600.0, checkpoint_batches=1)
            sums = store_checksums(self.folder, self.manifest)
            if sums:
                self.manifest["store_sha256"] = sums
                write_manifest(self.folder, self.manifest)
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting request
            log.error("writer of %s failed: %s", self.folder, exc)
            self._failed = exc
            for fut in self._inflight:
                if not fut.done():
                    fut.set_exception(exc)
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not _STOP and not item[2].done():
                    item[2].set_exception(exc)


def _merge(batches: list[VectorBatch], next_row: int) -> VectorBatch:
    if len(batches) == 1:
        b = batches[0]
        return VectorBatch(b.ids, b.vectors, b.payloads, b.rejects, next_row, b.rows, b.lines,
                           b.source)
    vecs = [np.asarray(b.vectors, dtype=np.float32) for b in batches if len(b.ids)]
    dim = vecs[0].shape[1] if vecs else 0
    return VectorBatch(
        np.concatenate([np.asarray(b.ids, dtype=np.int64) for b in batches]),
        np.concatenate(vecs) if vecs else np.zeros((0, dim), np.float32),
        [p for b in batches for p in b.payloads],
        [r for b in batches for r in b.rejects], next_row,
        [r for b in batches for r in (b.rows or [0] * len(b.ids))],
        [ln for b in batches for ln in (b.lines or [None] * len(b.ids))], SERVICE_INPUT)
