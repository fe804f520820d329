"""The long-lived writer of one index: open once, write many batches and changes, commit, close.

The commit loop of :meth:`IndexBuilder.build <slimvec.indexer.builder.IndexBuilder.build>` reads
one input to its end; a server writes whatever requests bring, for as long as it serves the index.
:class:`LiveWriter` is that: made by :meth:`IndexBuilder.open_writer
<slimvec.indexer.builder.IndexBuilder.open_writer>` (the writer lock is held from then on),
:meth:`~LiveWriter.write` / :meth:`~LiveWriter.mutate` change the index, :meth:`~LiveWriter.commit`
makes the changes durable (the same commit protocol), and :meth:`~LiveWriter.close` finishes the
index when anything was written (state ``done``, store checksums) and releases it::

    with IndexBuilder.open_writer(folder, spec, fit=sample) as w:   # a new index, committed
        w.write(batch)
        w.commit()
    # or by hand, as the service's writer thread does: w.finish(); w.close(exc)

The service's writer thread (:mod:`slimvec.service.indexes.writer`) drives one instead of entering and
exiting an ``IndexBuilder`` by hand (issue 24 item 2); ``service/indexes/served.py``'s ``_open_builder``
is one :meth:`open_writer` call.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from slimvec.index.manifest import Manifest
from slimvec.indexer.writer import IngestSummary, VectorBatch

__all__ = ["LiveWriter", "Opened"]

T = TypeVar("T")


class Opened(Protocol):
    """The entered and opened builder a :class:`LiveWriter` drives (``IndexBuilder``)."""

    folder: Path
    summary: IngestSummary
    manifest: Manifest | None
    store: Any
    reducer: Any

    def write(self, batch: VectorBatch) -> int:
        """Reduce and upsert a batch."""

    def commit(self, next_row: int | None = None, state: str = "running") -> None:
        """Make what was written durable."""

    def finish(self, recalibrate: bool = True) -> None:
        """State ``done``, store checksums; closes the store."""

    def calibrate(self, write: bool = True, queries: np.ndarray | None = None) -> bool:
        """Calibrate a ``rescore=auto`` depth."""

    def calibration_due(self, growth: float = 2.0) -> bool:
        """An ``auto`` depth is due."""

    def begin_input(self, plan: Any = None, progress: Any = None) -> None:
        """Start another input's progress record between commits (a service job)."""

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Close the store and release the writer lock."""


class LiveWriter:
    """A long-lived writer of one opened index (see the module docstring).

    Parameters
    ----------
    builder : IndexBuilder
        Entered and opened (lock held, store open); released by :meth:`close`.
    """

    def __init__(self, builder: Opened) -> None:
        self.builder = builder
        self.wrote = False  # anything committed since it was opened: close() finishes then
        self._closed = False

    @property
    def folder(self) -> Path:
        """The index folder."""
        return self.builder.folder

    @property
    def manifest(self) -> Manifest:
        """The opened index's manifest."""
        assert self.builder.manifest is not None  # open_writer opened it
        return self.builder.manifest

    @property
    def next_row(self) -> int:
        """The row number the next batch continues from (the record's ``next_row``)."""
        return int(self.builder.summary.next_row)

    def write(self, batch: VectorBatch) -> int:
        """Reduce and upsert a batch (durable at the next :meth:`commit`); returns its rows
        accounted for (upserted + rejected)."""
        return self.builder.write(batch)

    def mutate(self, fn: Callable[[Any], T]) -> T:
        """Change stored points with ``fn(builder)`` (delete, payload update; durable at the next
        :meth:`commit`); returns what ``fn`` returned."""
        return fn(self.builder)

    def commit(self) -> None:
        """Make everything written so far durable (rejects -> store -> extra -> manifest)."""
        self.builder.commit()
        self.wrote = True

    def calibration_due(self) -> bool:
        """True when a ``rescore=auto`` depth should be (re)calibrated (the index doubled)."""
        return self.builder.calibration_due()

    def calibrate(self, queries: np.ndarray | None = None) -> bool:
        """Calibrate a ``rescore=auto`` depth on the committed index (on ``queries`` when given,
        kept for later calibrations); returns whether anything was calibrated."""
        return self.builder.calibrate(queries=queries)

    def finish(self) -> None:
        """Finish the index: state ``done``, calibration, store checksums (closes the store)."""
        self.builder.finish()

    def close(self, exc: BaseException | None = None) -> None:
        """Release the index: close its store and the writer lock (idempotent). ``exc``: what
        stopped the writer, if anything (a new index that failed before its first commit is
        removed, I/O errors are mapped as the builder's context manager does)."""
        if self._closed:
            return
        self._closed = True
        self.builder.__exit__(type(exc) if exc is not None else None, exc,
                              exc.__traceback__ if exc is not None else None)

    def __enter__(self) -> LiveWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc is None and self.wrote:
                self.finish()
        except BaseException as failed:
            self.close(failed)
            raise
        self.close(exc)
