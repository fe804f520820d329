"""One long-lived writer per index: requests hand it batches, it commits them in order.

The writer owns the index's long-lived writer (:class:`~slimvec.indexer.live.LiveWriter`, from
:meth:`IndexBuilder.open_writer <slimvec.indexer.builder.IndexBuilder.open_writer>`, which holds
the writer lock for as long as the service serves the index). A thread takes the queued batches,
merges whatever queued during the previous commit (group commit), calls ``write`` + ``commit``
(rejects fsynced -> store durable -> manifest) and only then resolves the requests' futures: a
request answered with ``committed: true`` survives a kill -9. On close it calls ``finish`` (state
``done``, store checksums) if anything was written. An index whose recipe says ``rescore=auto``
is calibrated after the first commit and again each time it has doubled, so its searches rescore
at a measured depth while it grows (:meth:`IndexBuilder.calibration_due`); a calibration on the
user's own queries (``POST /indexes/NAME/calibrate``) is queued like a batch and runs between
commits. A batch that fails (group-committed batches are then retried one by one) fails its own
request only: the writer goes on.

A failure of the store itself on a commit (an I/O error: disk full, folder made read-only, file too
large) is not a bad batch: the writer turns *degraded* (:attr:`IndexWriter.degraded`). The request
(and whatever queued behind it) gets :class:`WriterDegraded` (503 with Retry-After), new writes are
refused with the cause, searches go on from the last commit (the store stays open), and the writer
thread retries the commit with exponential backoff (0.5 s doubling to 30 s, each attempt logged);
once a commit goes through, the writer is ready again. Every write acknowledged before the failure
was committed, so nothing acknowledged is lost; a write answered 503 may or may not have been kept:
resend it (an upsert by id is idempotent). Writes and searches share the store through :class:`LockedStore` and one lock (a Qdrant Edge shard
opens once per process; its reads and writes are not documented as thread-safe). A job writes
through this writer too (:meth:`IndexWriter.run_job`), locking per batch and commit only, so
searches go on; requests are refused (409) until it ends.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from slimvec.errors import IndexBusyError, PersistenceError, StoreError
from slimvec.indexer.builder import IndexBuilder
from slimvec.indexer.live import LiveWriter
from slimvec.indexer.writer import VectorBatch
from slimvec.service.indexes.live import LiveIndex, LockedStore  # their home before; re-exported

__all__ = ["IndexWriter", "LiveIndex", "LockedStore", "WriterClosed", "WriterDegraded", "SERVICE_INPUT", "is_store_failure"]

log = logging.getLogger(__name__)
_STOP = object()
SERVICE_INPUT = "slimvec-serve"
RETRY_FIRST, RETRY_MAX = 0.5, 30.0  # seconds: the degraded writer's backoff
_IO_HINTS = ("No space left", "Read-only file system", "Permission denied", "Disk quota",
             "File too large", "disk I/O error", "database or disk is full",
             "attempt to write a readonly database", "os error")


class WriterClosed(StoreError):
    """The writer is stopped (shutting down, deleted, or it failed)."""


class WriterDegraded(WriterClosed):
    """The writer's store failed on a commit; it retries by itself (``retry_after`` seconds)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def is_store_failure(exc: BaseException) -> bool:
    """True when ``exc`` is the store or disk failing (I/O), not a bad batch.

    Parameters
    ----------
    exc : BaseException
        What a write or commit raised.

    Returns
    -------
    bool
        ``OSError``, :class:`~slimvec.errors.PersistenceError`, or a store engine's own
        exception whose message reports an I/O failure.
    """
    if isinstance(exc, (OSError, PersistenceError)):
        return True
    return isinstance(exc, Exception) and any(h in str(exc) for h in _IO_HINTS)


class _Calibrate:
    """A queued request to calibrate the rescoring depth on given query vectors."""

    def __init__(self, queries: np.ndarray, fut: Future) -> None:
        self.queries, self.fut = queries, fut


class _Mutate:
    """A queued change of stored points (delete, payload update): ``fn(builder)`` under the
    store lock, then a commit; the future resolves to what ``fn`` returned."""

    def __init__(self, fn: Callable[[IndexBuilder], Any], fut: Future) -> None:
        self.fn, self.fut = fn, fut


class _Job(_Mutate):
    """A queued job: ``fn(writer)`` without the lock (it takes it per batch and commit)."""

    def __init__(self, fn: Callable[[IndexWriter], Any], fut: Future) -> None:
        self.job, self.fut = fn, fut


def _fut(item: Any) -> Future:
    """The future of a queued item (a batch is ``(batch, rows, future)``)."""
    return item.fut if isinstance(item, (_Calibrate, _Mutate)) else item[2]


class IndexWriter:
    """The writer thread of one index.

    Parameters
    ----------
    builder : LiveWriter or IndexBuilder
        The index's long-lived writer (:meth:`IndexBuilder.open_writer`), or a builder entered
        and opened (lock held, store open) that it wraps; released by :meth:`close`.
    lock : RLock
        Shared with the searches' :class:`LockedStore`.
    on_commit : callable, optional
        Called (holding ``lock``) after each commit.
    on_dead : callable, optional
        Called with the exception when the thread died (store closed, lock released) and the
        writer was not closed: its owner reopens the index (:meth:`ServedIndex._supervise`).
    """

    def __init__(self, builder: LiveWriter | IndexBuilder, lock: threading.RLock,
                 on_commit: Callable[[], None] | None = None,
                 on_dead: Callable[[BaseException], None] | None = None) -> None:
        self.live = builder if isinstance(builder, LiveWriter) else LiveWriter(builder)
        self.builder, self.lock = self.live.builder, lock
        self._on_commit = on_commit or (lambda: None)
        self._on_dead = on_dead
        self._queue: queue.Queue[Any] = queue.Queue()
        self._failed: BaseException | None = None
        self._closed = False
        self._wrote = False
        self._calibration_failed_at = 0
        self._guard = threading.Lock()
        self._wake = threading.Event()
        self.degraded: BaseException | None = None
        self.last_error: str | None = None
        self.next_retry: float | None = None  # epoch seconds of the next reopen attempt
        self.retries = 0
        self.job: str | None = None  # what writes while a job is queued or runs (refusing)
        #: the manifest's progress record is a job's: "done", or "unfinished" (a resume goes on
        #: from it: closing does not finish it); requests then begin their own record
        self.job_progress: str | None = None
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"writer:{builder.folder.name}")
        self._thread.start()

    def submit(self, batch: VectorBatch, rows: int) -> Future:
        """Queue a batch of ``rows`` request rows; the future resolves once it is committed."""
        fut: Future = Future()
        with self._guard:
            self._refuse()
            self._queue.put((batch, rows, fut))
        return fut

    def calibrate(self, queries: np.ndarray) -> Future:
        """Queue a calibration of the ``rescore=auto`` depth on ``queries`` (full vectors); it
        runs between commits, and the queries are kept for the index's later calibrations
        (:meth:`IndexBuilder.calibrate`). The future resolves to the new ``RescoreInfo``."""
        fut: Future = Future()
        with self._guard:
            self._refuse()
            self._queue.put(_Calibrate(queries, fut))
        return fut

    def mutate(self, fn: Callable[[IndexBuilder], Any]) -> Future:
        """Queue a change of stored points (delete, payload update) made by ``fn(builder)``; it
        runs between the batches queued before and after it (so a delete never overtakes an
        earlier upsert of the same id), is committed like a batch, and the future resolves to
        ``fn``'s result once it is durable. Its failure goes to its request only."""
        fut: Future = Future()
        with self._guard:
            self._refuse()
            self._queue.put(_Mutate(fn, fut))
        return fut

    def run_job(self, fn: Callable[[IndexWriter], Any], reason: str) -> Future:
        """Queue a job (ingest, sync) that writes through this writer: ``fn(self)`` runs on the
        writer thread after the requests queued before it, takes :attr:`lock` only per batch
        and commit (:meth:`job_commit`), so searches go on; requests are refused (409) until it
        ends. The future resolves to ``fn``'s result."""
        fut: Future = Future()
        with self._guard:
            self._refuse()
            self.job = reason
            self._queue.put(_Job(fn, fut))
        return fut

    def job_commit(self, commit: Callable[[], None]) -> None:
        """Run a job's ``commit`` under the store lock, as the writer's own commits run."""
        with self.lock:
            commit()
            self._wrote = True
            self._on_commit()

    @property
    def dead(self) -> BaseException | None:
        """Why the writer thread died (``None`` while it runs or after a clean close)."""
        return self._failed

    def _refuse(self) -> None:
        """Raise why the writer takes no request now (call holding ``_guard``)."""
        if self.job is not None:
            raise IndexBusyError(f"Index {self.builder.folder.name!r} is being written by "
                                 f"{self.job}; searches answer meanwhile, writes are taken when "
                                 "it finishes: retry then.")
        if self._closed or self._failed is not None:
            raise WriterClosed(f"{self.builder.folder.name}: the index writer is stopped"
                               + (f" ({self._failed})" if self._failed else "") + "; retry later.")
        if self.degraded is not None:
            raise self._degraded_error()

    def dead_error(self) -> WriterDegraded:
        """The 503 of an index whose writer thread died, until it is reopened."""
        wait = max(0.0, (self.next_retry or time.time()) - time.time())
        return WriterDegraded(
            f"Index {self.builder.folder.name!r} is degraded: its writer stopped "
            f"({self.last_error}) and is being reopened (next attempt in {wait:.1f} s, attempt "
            f"{self.retries + 1}); retry later.", retry_after=max(1.0, wait))

    def _degraded_error(self) -> WriterDegraded:
        wait = max(0.0, (self.next_retry or time.time()) - time.time())
        return WriterDegraded(
            f"Index {self.builder.folder.name!r} is degraded: its store failed on a commit "
            f"({self.last_error}). Searches still answer from the last commit; the writer "
            f"retries by itself (next attempt in {wait:.1f} s, attempt {self.retries + 1}). "
            "Fix the cause (disk space, permissions) and resend this write later.",
            retry_after=max(1.0, wait))

    def _degrade(self, exc: BaseException, futs: list[Future]) -> None:
        """The store failed on a commit: fail ``futs`` and everything queued with the cause,
        then retry the commit with backoff until it goes through or the writer is closed."""
        with self._guard:
            self.degraded = exc
            self.last_error = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            self.next_retry = time.time() + RETRY_FIRST
            err = self._degraded_error()
            stop = False
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    continue
                futs.append(_fut(item))
            if stop:
                self._queue.put(_STOP)
        log.error("%s: the store failed on a commit (%s); the index is degraded (reads go on, "
                  "writes answer 503) and the writer retries with backoff",
                  self.builder.folder.name, self.last_error)
        for fut in futs:
            if not fut.done():
                fut.set_exception(err)
        self._recover()

    def _recover(self) -> None:
        """Retry the commit every 0.5 s doubling to 30 s until it succeeds or ``close``."""
        b, delay = self.live, RETRY_FIRST
        while not self._closed:
            self.next_retry = time.time() + delay
            if self._wake.wait(delay) or self._closed:
                return
            self.retries += 1
            try:
                with self.lock:
                    b.commit()
                    self._on_commit()
            except Exception as exc:  # noqa: BLE001 - still degraded: retry later
                self.last_error = str(exc).splitlines()[0][:300] or type(exc).__name__
                delay = min(delay * 2, RETRY_MAX)
                log.warning("%s: reopening the writer failed (attempt %d: %s); next attempt in "
                            "%.1f s", b.folder.name, self.retries, self.last_error, delay)
                continue
            with self._guard:
                log.warning("%s: the writer is back after %d attempt(s); the index is ready",
                            b.folder.name, self.retries)
                self.degraded, self.last_error, self.next_retry, self.retries = None, None, None, 0
            return

    def _job(self, req: _Job) -> None:
        """Run a queued job; requests are taken again before its future resolves."""
        try:
            result = req.job(self)
        except Exception as exc:  # noqa: BLE001 - handed to the job, never stops the writer
            self.job = None
            if is_store_failure(exc):
                self._degrade(exc, [req.fut])
            else:
                req.fut.set_exception(exc)
            return
        except BaseException as exc:  # noqa: BLE001 - the thread dies: the job is told
            self.job = None
            req.fut.set_exception(exc)
            raise
        self.job = None
        req.fut.set_result(result)

    def _service_progress(self) -> None:
        """After a job, the writer's own requests begin their own progress record (no input
        file): a rerun of the job's file then starts it anew instead of resuming."""
        if self.job_progress is not None:
            from slimvec.index.manifest import Progress
            from slimvec.indexer.progress import ResumePlan

            with self.lock:
                self.builder.begin_input(ResumePlan(), Progress())
            self.job_progress = None

    def _mutate(self, req: _Mutate) -> None:
        b = self.live
        try:
            self._service_progress()
            with self.lock:
                result = b.mutate(req.fn)
                b.commit()
                self._wrote = True
                self._on_commit()
            req.fut.set_result(result)
        except Exception as exc:  # noqa: BLE001 - handed to the request, never stops the writer
            if is_store_failure(exc):
                self._degrade(exc, [req.fut])
                return
            log.error("%s: a change of stored points failed (%s); the writer goes on",
                      b.folder.name, exc)
            req.fut.set_exception(exc)
        except BaseException as exc:  # noqa: BLE001 - the thread dies: no request left waiting
            req.fut.set_exception(exc)
            raise

    def _calibrate(self, req: _Calibrate) -> None:
        """Run a queued calibration; its failure goes to its request only, never stops the writer."""
        b = self.live
        try:
            with self.lock:
                b.calibrate(req.queries)
            req.fut.set_result(b.manifest.rescore)
        except Exception as exc:  # noqa: BLE001 - handed to the request
            req.fut.set_exception(exc)

    def close(self, timeout: float | None = None) -> None:
        """Commit what was queued, finish (if anything was written), release the index."""
        with self._guard:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._wake.set()
        self._thread.join(timeout)

    def _maybe_calibrate(self) -> None:
        """``rescore=auto``: calibrate once the index exists and each time it has doubled (the
        depth needed grows with N), so searches rescore before the index is ever finished. A
        failed calibration is logged and retried only after the next doubling: it never stops
        the writer."""
        b = self.live
        if not b.calibration_due() or b.manifest.count < 2 * self._calibration_failed_at:
            return
        try:
            b.calibrate()
        except Exception as exc:  # noqa: BLE001 - searches keep the previous depth
            self._calibration_failed_at = max(int(b.manifest.count), 1)
            log.warning("%s: rescore=auto calibration failed (%s); searches keep the previous "
                        "depth", b.folder.name, exc)

    def _write_group(self, items: list[Any]) -> None:
        """Write + commit the queued batches together; when that fails, each alone, so a bad
        batch fails its own request and nothing else. A batch's failure goes to its request
        only: the writer lives on (one bad batch used to stop it, and every later write answered
        503 until a restart)."""
        try:
            next_row = self._commit(items)
        except Exception as exc:  # noqa: BLE001 - handed to the requests, never stops the writer
            if is_store_failure(exc):  # the store, not a batch: degraded until a commit passes
                self._degrade(exc, [fut for _, _, fut in items])
                return
            if len(items) > 1:
                for item in items:
                    self._write_group([item])
                return
            log.error("%s: a write request failed (%s); the writer goes on",
                      self.builder.folder.name, exc)
            items[0][2].set_exception(exc)
            return
        except BaseException as exc:  # noqa: BLE001 - interpreter exit: no request left waiting
            for _, _, fut in items:
                if not fut.done():
                    fut.set_exception(exc)
            raise
        for _, _, fut in items:
            fut.set_result(next_row)

    def _commit(self, items: list[Any]) -> int:
        b = self.live
        self._service_progress()
        with self.lock:
            start = b.next_row
            batch = _merge([x[0] for x in items], start + sum(x[1] for x in items))
            b.write(batch)
            b.commit()
            self._wrote = True
            self._on_commit()
            self._maybe_calibrate()
        return int(batch.next_row)

    def _run(self) -> None:
        b = self.live
        failed: BaseException | None = None
        try:
            while True:
                item = self._queue.get()
                if item is _STOP:
                    break
                if isinstance(item, (_Calibrate, _Mutate)):
                    self._one(item)
                    continue
                items = [item]
                stop, calibration = False, None
                while True:  # group commit: take whatever queued meanwhile
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is _STOP:
                        stop = True
                        break
                    if isinstance(more, (_Calibrate, _Mutate)):  # after the batches queued before
                        calibration = more
                        break
                    items.append(more)
                self._write_group(items)
                if calibration is not None:
                    self._one(calibration)
                if stop:
                    break
            if self._wrote and self.degraded is None and self.job_progress != "unfinished":
                # a degraded store keeps its last commit; an unfinished job's record its resume
                with self.lock:
                    b.finish()
        except BaseException as exc:  # noqa: BLE001
            log.error("writer of %s failed: %s", b.folder, exc)
            self.last_error = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            self.next_retry = time.time() + RETRY_FIRST  # the owner's supervisor reopens it
            self._failed = failed = exc
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    continue
                fut = _fut(item)
                if not fut.done():
                    fut.set_exception(exc)
        finally:
            with self.lock:
                try:
                    b.close(failed)  # the store closed, the writer lock released
                except BaseException as exc:  # noqa: BLE001 - already reported above
                    log.error("closing %s: %s", b.folder, exc)
            if self._failed is not None and not self._closed and self._on_dead is not None:
                self._on_dead(self._failed)


    def _one(self, item: Any) -> None:
        """Run a queued job, change or calibration."""
        if isinstance(item, _Job):
            self._job(item)
        elif isinstance(item, _Mutate):
            self._mutate(item)
        else:
            self._calibrate(item)


def _merge(batches: list[VectorBatch], next_row: int) -> VectorBatch:
    if len(batches) == 1:
        b = batches[0]
        return VectorBatch(b.ids, b.vectors, b.payloads, b.rejects, next_row, b.rows, b.lines,
                           b.source, check_norms=False)
    vecs = [np.asarray(b.vectors, dtype=np.float32) for b in batches if len(b.ids)]
    dim = vecs[0].shape[1] if vecs else 0
    return VectorBatch(
        np.concatenate([np.asarray(b.ids, dtype=np.int64) for b in batches]),
        np.concatenate(vecs) if vecs else np.zeros((0, dim), np.float32),
        [p for b in batches for p in b.payloads],
        [r for b in batches for r in b.rejects], next_row,
        [r for b in batches for r in (b.rows or [0] * len(b.ids))],
        [ln for b in batches for ln in (b.lines or [None] * len(b.ids))], SERVICE_INPUT, check_norms=False)
