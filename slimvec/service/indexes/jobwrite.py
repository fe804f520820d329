"""A served index's builder lent to an ingest or sync job, so the job writes through the index's
one writer and the index stays open for searches (issue 25 item 7).

The producers (:func:`slimvec.indexer.pipeline.ingest_with`, :func:`slimvec.ops.sync.sync_with`)
drive an :class:`~slimvec.indexer.builder.IndexBuilder`: resolve, plan, open, begin, write,
commit, finish. :class:`SharedBuilder` answers them on the served builder (already open, lock
held) from the writer's thread (:meth:`slimvec.service.indexes.writer.IndexWriter.run_job`):

- ``open`` checks the job's spec and dimension against the open index instead of opening it;
- ``begin`` starts the job's progress record in the manifest (its input, fingerprint, start row),
  so a kill -9 mid-job resumes after the job's last commit, exactly as a rerun CLI ingest does;
- ``write`` and ``commit`` take the store lock per batch and per commit, never for the whole job:
  searches between them answer from everything committed (and what the job has written since);
- ``commit`` first waits for a snapshot's pin of the folder outside the store lock, so a job
  held by a snapshot never holds the searches;
- ``finish`` commits the job's record as ``done`` (and calibrates a ``rescore=auto`` depth as an
  ingest's finish does); the store stays open for the service. Nothing here closes it.

The job's phase and counts go to ``report`` as it goes (``writing``, ``committing``,
``finishing``), with ``committed_rows``: the source rows durable so far.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from slimvec.errors import DimensionMismatchError
from slimvec.index.locking import CommitGuard
from slimvec.indexer.writer import IngestSummary, VectorBatch
from slimvec.service.indexes.live import LockedStore

__all__ = ["SharedBuilder"]

log = logging.getLogger(__name__)


class SharedBuilder:
    """The served :class:`~slimvec.indexer.builder.IndexBuilder` as a job's builder.

    Parameters
    ----------
    writer : IndexWriter
        The served index's writer; this runs on its thread (:meth:`IndexWriter.run_job`).
    report : callable
        ``report(phase, summary, committed_rows)`` after each step of the job.
    phase : str
        The phase name while batches are written (``writing``; ``syncing`` for a sync).
    notify : callable, optional
        One-line notices (default: log).
    """

    def __init__(self, writer: Any, report: Callable[[str, Any, int], None],
                 phase: str = "writing", notify: Callable[[str], None] | None = None) -> None:
        self._w, self._b = writer, writer.builder
        self._report, self._phase = report, phase
        self.folder = self._b.folder
        self.say = notify or log.info
        self.store = LockedStore(self._b.store, writer.lock)
        if self._b.existing is None:
            # the writer created this index (fitted on a sample over HTTP): its manifest is the
            # index in the folder, which resolve / plan check a job's spec and input against
            self._b._old = self._b.manifest
        self._saved = (self._b.summary, self._b.on_commit)
        self._b.summary = IngestSummary(index=str(self.folder))
        self.committed_rows = 0

    # ------------------------------------------------------------------ the builder's view
    @property
    def summary(self) -> Any:
        """The job's summary (the served builder counts into it while the job writes)."""
        return self._b.summary

    @summary.setter
    def summary(self, value: Any) -> None:
        self._b.summary = value

    @property
    def on_commit(self) -> Callable[[], None] | None:
        """Extra state committed with each commit (the job's duplicate tracker or records)."""
        return self._b.on_commit

    @on_commit.setter
    def on_commit(self, fn: Callable[[], None] | None) -> None:
        self._b.on_commit = fn

    @property
    def manifest(self) -> Any:
        return self._b.manifest

    @property
    def existing(self) -> Any:
        return self._b.existing

    @property
    def reducer(self) -> Any:
        return self._b.reducer

    def resolve(self, spec: Any) -> Any:
        """The job's spec checked against the open index (:meth:`IndexBuilder.resolve`)."""
        return self._b.resolve(spec)

    def plan(self, input_name: Any, fingerprint: dict[str, Any], columns: dict[str, Any]) -> Any:
        """Start, resume or skip the job's input (:meth:`IndexBuilder.plan`)."""
        return self._b.plan(input_name, fingerprint, columns)

    def open(self, spec: Any, dim_in: int, fit: Any = None, fit_reducer: Any = None) -> Any:
        """The open index's manifest once the job's spec and vector dimension match it (the
        index is open already: nothing is fitted or created)."""
        self._b.resolve(spec)
        if int(self.manifest.dim_in) != int(dim_in):
            raise DimensionMismatchError(
                f"reducer input of {self.folder} vs the job's encoder", int(self.manifest.dim_in),
                int(dim_in), "Use the index's encoder, or ingest into another index.")
        return self.manifest

    def due(self) -> bool:
        return bool(self._b.due())

    def calibration_due(self) -> bool:
        return bool(self._b.calibration_due())

    def build(self, producer: Any) -> IngestSummary:
        """The one write sequence (:meth:`IndexBuilder.build`) run on this shared builder: its
        resolve / plan / open / begin / write / commit are the ones above."""
        from slimvec.indexer.builder import IndexBuilder

        return IndexBuilder.build(self, producer)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ writing
    def begin(self, plan: Any = None, progress: Any = None) -> None:
        """Begin the job's progress record (a resumed job cuts its rejects back)."""
        with self._w.lock:
            self._b.begin_input(plan, progress)
        self._w.job_progress = "unfinished"
        self.committed_rows = int(self.manifest.progress.next_row)
        self._step(self._phase)

    def write(self, batch: VectorBatch) -> int:
        """Reduce and upsert one batch under the store lock (durable at the next commit)."""
        with self._w.lock:
            return int(self._b.write(batch))

    def delete(self, ids: np.ndarray) -> int:
        """Delete ids from the store and the kept full vectors (a sync's deletes); returns how
        many the store held."""
        with self._w.lock:
            removed = int(self._b.store.delete(ids) or 0)
            full = getattr(getattr(self._b, "_target", None), "full", None)
            if full is not None and len(ids):
                full.delete(ids)
        return removed

    def commit(self, next_row: int | None = None, state: str = "running") -> None:
        """Commit what the job wrote; a snapshot pinning the folder is waited for first, without
        the store lock (searches go on meanwhile)."""
        self._step("committing")
        self._unpinned()
        self._w.job_commit(lambda: self._b.commit(next_row, state))
        self.committed_rows = int(self.manifest.progress.next_row)
        self._step(self._phase if state == "running" else "finishing")

    def finish(self, recalibrate: bool = True) -> None:
        """Commit the job's record as done and calibrate a ``rescore=auto`` depth as
        :meth:`IndexBuilder.finish` does; the store stays open (the service's)."""
        self._step("finishing")
        self.commit(state="done")
        self._w.job_progress = "done"
        if recalibrate or self._b.calibration_due():
            with self._w.lock:
                self._b.calibrate()
        self.summary.count = int(self.manifest.count)

    def done_summary(self, input_label: str) -> IngestSummary:
        """The summary of a job whose file was ingested completely before."""
        old = self.existing
        s = self.summary
        s.input, s.already_done, s.count = input_label, True, int(old.count)
        s.next_row = old.progress.next_row if old.progress else 0
        self.committed_rows = int(s.next_row)
        if old.calibration_missing:
            with self._w.lock:
                self._b.calibrate()
        return s

    def run(self, batches: Any, advance: Callable[[int], None] | None = None,
            on_batch: Callable[[int], None] | None = None) -> IngestSummary:
        """The commit loop of :meth:`IndexBuilder.run`, one lock hold per batch and commit."""
        s = self.summary
        start = s.next_row
        for batch in batches:
            before = s.next_row
            n = self.write(batch)
            if int(batch.next_row) - before != n:
                s.unaccounted += int(batch.next_row) - before - n
            if advance is not None:
                advance(n)
            self._step(self._phase)
            if on_batch is not None:
                on_batch(s.next_row)
            if self.due():
                self.commit()
        self.finish()
        s.rows_read = s.next_row - start
        return s

    def release(self) -> None:
        """Give the served builder its own summary and commit hook back (the job ended)."""
        self._b.summary, self._b.on_commit = self._saved

    def _unpinned(self) -> None:
        """Wait, without the store lock, until no snapshot pins the folder (searches go on)."""
        with CommitGuard(self.folder, exclusive=True):
            pass

    def _step(self, phase: str) -> None:
        self._report(phase, self.summary, self.committed_rows)
