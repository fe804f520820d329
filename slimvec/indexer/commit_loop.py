"""The commit protocol of the index writer: begin, write, commit, finish and the commit loop.

A commit is, in this order: ``rejects.jsonl`` flushed and fsynced; ``store.flush()`` (FAISS /
hnswlib written to a temporary file, fsynced and renamed; Qdrant Edge flushed; remote Qdrant
acknowledged every upsert); extra state (``on_commit``, e.g. the duplicate tracker); the
manifest's progress record written atomically. A crash anywhere leaves the store at or ahead of
the record, never behind, and ids are deterministic, so rows re-read after a resume overwrite
instead of duplicating.

:class:`CommitLoop` is a part of :class:`~slimvec.indexer.builder.IndexBuilder` (split out of it,
issue 24 item 2); it works on the builder's opened index (``manifest``, ``reducer``, the store).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError
from slimvec.index.folder import store_checksums
from slimvec.index.locking import CommitGuard
from slimvec.index.manifest import Manifest, Progress
from slimvec.index.safefs import open_append_text
from slimvec.indexer.folder_safety import NEW_MARKER
from slimvec.indexer.interrupt import StopFlag
from slimvec.indexer.keepfull import KeepFullStore
from slimvec.indexer.progress import ResumePlan, truncate_file
from slimvec.indexer.writer import REJECTS, IngestSummary, Prereduced, VectorBatch, with_bad_full_rows_marked, write_batch
from slimvec.reducers import Reducer

__all__ = ["CommitLoop"]

log = logging.getLogger(__name__)


class CommitLoop:
    """Begin / write / commit / finish / run of an opened index (mixed into ``IndexBuilder``)."""

    folder: Path
    strict: bool
    checkpoint_seconds: float
    checkpoint_batches: int
    summary: IngestSummary
    manifest: Manifest | None
    reducer: Reducer | None
    store: Any
    on_commit: Callable[[], None] | None
    _target: Any
    _plan: ResumePlan | None
    _progress_input: dict[str, Any] | None
    _rejects: Any
    _next_row: int
    _last_commit: float
    _batches_since: int

    # DepthCalibration's (slimvec.indexer.depth_calibration), the builder's other part
    calibrate: Callable[..., bool]
    calibration_due: Callable[..., bool]

    def _opened(self) -> Manifest:
        """The opened index's manifest (:class:`ConfigError` before ``open``)."""
        if self.manifest is None:
            raise ConfigError("IndexBuilder.open() must be called before writing.")
        return self.manifest

    def begin(self, plan: ResumePlan | None = None, progress: Progress | None = None) -> None:
        """Record a running write (called by the first :meth:`write` when not called before).

        A resumed run cuts ``rejects.jsonl`` back to its committed length. Without a planned
        input (a long-lived writer) the record names no input file.

        Parameters
        ----------
        plan : ResumePlan, optional
            Default: the one :meth:`plan` made (or a fresh start).
        progress : Progress, optional
            A producer's own record (e.g. the Ray engine's ``engine`` / ``inputs`` /
            ``committed``); its ``next_row``, ``state``, ``rejects_bytes`` and ``started`` are
            set here. Default: the input :meth:`plan` was given.
        """
        if self._rejects is not None:
            return
        manifest = self._opened()
        # a writer without an input (a script's, the service's) continues the recorded count, so
        # the manifest written here, outside a commit, still names the last commit's next_row
        old = manifest.progress
        unplanned = plan is None and self._plan is None and progress is None
        plan = plan or self._plan or ResumePlan(
            start_row=old.next_row if unplanned and old is not None and old.input is None else 0)
        if plan.resuming:
            truncate_file(self.folder / REJECTS, plan.rejects_bytes)
            self.summary.resumed_from = plan.start_row
        self._rejects = open_append_text(self.folder / REJECTS)
        self._rejects.seek(0, os.SEEK_END)
        if progress is None:
            info = self._progress_input or {"input": None, "fingerprint": None, "columns": {}}
            progress = Progress(input=info["input"], fingerprint=info["fingerprint"],
                                columns=info["columns"])
        manifest.progress = replace(
            progress, next_row=plan.start_row, state="running",
            rejects_bytes=int(self._rejects.tell()),
            started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        manifest.store_sha256 = {}  # store files are about to change
        manifest.write(self.folder)
        (self.folder / NEW_MARKER).unlink(missing_ok=True)  # the manifest now proves ownership
        self._next_row = plan.start_row
        self.summary.next_row = plan.start_row
        self._last_commit = time.monotonic()

    def begin_input(self, plan: ResumePlan | None = None,
                    progress: Progress | None = None) -> None:
        """A long-lived writer starts another input (a service job, or its own requests again
        after one) between its commits: :meth:`begin` a new progress record, so the manifest
        says which input a resume continues and where (what was written since the last commit
        is committed with the new input's first commit)."""
        if self._rejects is not None:
            self._rejects.close()
            self._rejects = None
        self.begin(plan, progress)

    def write(self, batch: VectorBatch) -> int:
        """Reduce and upsert one batch and record its rejects (durable at the next commit).

        A batch with ``reduced=True`` was reduced by the producer (with this index's reducer
        artifact): it is checked against ``dim_out`` and upserted without reducing again.

        Returns
        -------
        int
            Rows of the batch accounted for (upserted + rejected).

        Raises
        ------
        ConfigError
            A reduced batch without its full vectors for an index that keeps them
            (``--keep-full``).
        """
        self.begin()
        manifest = self._opened()
        reducer: Any = self.reducer
        dim = int(manifest.dim_in)
        if batch.segment is not None:  # written elsewhere: adopted whole
            from slimvec.indexer.segments import adopt_segment

            n = adopt_segment(self._target, Path(batch.segment), self._rejects, self.summary)
            self.summary.rows += n
            self._next_row = self.summary.next_row = int(batch.next_row)
            self._batches_since += 1
            return n
        if batch.reduced:
            if isinstance(self._target, KeepFullStore):
                if batch.full is None:
                    raise ConfigError(
                        f"{self.folder} keeps full vectors (--keep-full) but this producer sends "
                        "only reduced vectors; send their full vectors too (VectorBatch.full), or "
                        "ingest into an index without --keep-full.")
                batch = with_bad_full_rows_marked(batch, dim)
                self._target.stage(batch.ids, batch.full, batch.check_norms)
            reducer, dim = Prereduced(), int(manifest.dim_out)
        elif isinstance(self._target, KeepFullStore):
            self._target.stage(batch.ids, batch.vectors, batch.check_norms)
        write_batch(batch, self._target, reducer, dim, self._rejects, self.summary, self.strict)
        n = len(batch.ids) + sum(not r.kept for r in batch.rejects)
        self.summary.rows += n
        self._next_row = int(batch.next_row)
        self.summary.next_row = self._next_row
        self._batches_since += 1
        return n

    def commit(self, next_row: int | None = None, state: str = "running") -> None:
        """Make everything written so far durable: rejects fsync -> store -> extra -> manifest."""
        self.begin()
        with CommitGuard(self.folder, exclusive=True):  # a snapshot never pins half a commit
            self._commit(next_row, state)

    def _commit(self, next_row: int | None, state: str) -> None:
        manifest = self._opened()
        if next_row is not None:
            self._next_row = int(next_row)
        self._rejects.flush()
        os.fsync(self._rejects.fileno())
        self._target.flush()
        if self.on_commit is not None:
            self.on_commit()
        progress = manifest.progress
        assert progress is not None  # begin() recorded it
        progress.next_row = self._next_row
        progress.rejects_bytes = int(self._rejects.tell())
        progress.state = state
        manifest.count = int(self._target.count())
        manifest.write(self.folder)
        self._last_commit = time.monotonic()
        self._batches_since = 0

    def due(self) -> bool:
        """True when :meth:`run`'s checkpoint interval has passed."""
        return (time.monotonic() - self._last_commit >= self.checkpoint_seconds
                or (self.checkpoint_batches > 0 and self._batches_since >= self.checkpoint_batches))

    def finish(self, recalibrate: bool = True) -> None:
        """Finalize the store, commit with state ``done`` and record the store's checksums.

        ``recalibrate=False`` (``ingest --sync``, which changes a few documents of an index)
        calibrates a ``rescore=auto`` depth only when :meth:`calibration_due`.
        """
        self.begin()
        manifest = self._opened()
        self._target.finalize()
        self.commit(state="done")
        self.summary.count = manifest.count
        calibrated = self.calibrate(write=False) if recalibrate or self.calibration_due() \
            else False
        self._target.close()
        self._target = self.store = None
        sums = store_checksums(self.folder, manifest)
        if sums or calibrated:
            manifest.store_sha256 = sums
            manifest.write(self.folder)

    def run(self, batches: Iterable[VectorBatch], advance: Callable[[int], None] | None = None,
            on_batch: Callable[[int], None] | None = None) -> IngestSummary:
        """The commit loop over an iterator of batches (ingest, migrate).

        Commits every ``checkpoint_seconds`` / ``checkpoint_batches`` and at the end, then
        :meth:`finish`. The first SIGINT / SIGTERM stops at the next batch boundary with a final
        commit (``summary.interrupted``; rerun to resume).
        """
        self.begin()
        start = self._next_row
        with StopFlag() as stop:
            for batch in batches:
                before = self._next_row
                n = self.write(batch)
                self._reconcile(before, batch, n)
                if advance is not None:
                    advance(n)
                if on_batch is not None:
                    on_batch(self._next_row)
                if stop.requested:
                    self.commit()
                    self.summary.interrupted = True
                    break
                if self.due() or batch.segment is not None:
                    self.commit()
            if stop.requested and not self.summary.interrupted:  # the producer ended early for it
                self.commit()
                self.summary.interrupted = True
            if not self.summary.interrupted:
                self.finish()
        self.summary.rows_read = self._next_row - start
        if self.summary.unaccounted:
            log.warning("%s: %d source rows read, %d accounted for (%d indexed, %d rejected): %d "
                        "rows unaccounted for", self.summary.input or self.folder,
                        self.summary.rows_read, self.summary.rows, self.summary.ingested,
                        self.summary.rejected, self.summary.unaccounted)
        return self.summary

    def _reconcile(self, before: int, batch: VectorBatch, accounted: int) -> None:
        """Every source row between two batches' ``next_row`` is upserted or rejected."""
        read = int(batch.next_row) - before
        if read != accounted:
            self.summary.unaccounted += read - accounted
            log.warning("%s: a batch read source rows %d-%d (%d) but carried %d vectors and "
                        "rejects (%d unaccounted)", batch.source or self.folder, before,
                        batch.next_row, read, accounted, read - accounted)
