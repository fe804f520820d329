"""The producer side of the one write sequence (issue 24 item 2).

Every way into an index (``ingest``, ``migrate``, ``ingest --engine ray``, a test's array) is a
:class:`Producer`: what it asks to build, which input it reads (for the resume plan), a fit sample
for a new index and its batches from a resume point. The sequence around them is written once,
in :meth:`IndexBuilder.build <slimvec.indexer.builder.IndexBuilder.build>`::

    build_spec -> resolve -> resolved -> plan -> already done? (notice, done summary)
    -> running( open(open_spec, dim_in, fit, fit_reducer) -> resuming notice
                -> begin(plan, progress_record) -> begun -> run(batches, advance, on_batch) )

A producer overrides only what differs from the defaults below; the required parts are
:meth:`Producer.build_spec`, :meth:`Producer.plan_key` (or :meth:`Producer.plan`),
:meth:`Producer.dim_in`, :meth:`Producer.fit` and :meth:`Producer.batches`. This module sits below
the builder: it names the builder only through the :class:`Target` protocol.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from slimvec.buildspec import BuildSpec
from slimvec.index.manifest import Manifest, Progress
from slimvec.indexer.progress import ResumePlan
from slimvec.indexer.writer import IngestSummary, VectorBatch
from slimvec.reducers import Reducer

__all__ = ["Producer", "Target", "bulk_load"]


class Target(Protocol):
    """What a producer sees of the builder writing its index."""

    folder: Path
    summary: IngestSummary
    manifest: Manifest | None
    on_commit: Callable[[], None] | None
    store: Any  # the open store, once the builder opened it

    @property
    def existing(self) -> Manifest | None:
        """The index already in the folder (``None``: a new index, or ``rebuild``)."""

    def say(self, message: str) -> None:
        """A one-line notice for the user."""

    def plan(self, input_name: Any, fingerprint: dict[str, Any],
             columns: dict[str, Any]) -> ResumePlan:
        """Start, resume or skip the input (``IndexBuilder.plan``)."""


def bulk_load(b: Target) -> None:
    """Tell the store that a bulk load ending with the builder writes it (``slimvec ingest``, the
    Ray engine): a FAISS graph is then built over float16 codes (:mod:`slimvec.connectors.faiss_build`)."""
    if hasattr(b.store, "fp16_build"):
        b.store.fp16_build = True


class Producer:
    """The producer-specific part of a write; see the module docstring.

    Attributes
    ----------
    label : str
        The input as the summary and the notices name it (a path, a source spec).
    unit : str
        What a source row is called in the resuming notice (``row``, ``vector``).
    """

    label: str = ""
    unit: str = "row"

    # ------------------------------------------------------------------ before anything is opened
    def build_spec(self, b: Target) -> BuildSpec:
        """What this write asks to build (recipe applied); :meth:`IndexBuilder.resolve` fills
        the unset fields from the existing index or the defaults."""
        raise NotImplementedError

    def resolved(self, b: Target, spec: BuildSpec) -> None:
        """Called with the resolved spec, before the plan (notices, checks against the index)."""

    def plan_key(self) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """``(input name, fingerprint, columns)`` the resume plan compares with the record."""
        raise NotImplementedError

    def plan(self, b: Target) -> ResumePlan:
        """Start, resume or skip (default: :meth:`IndexBuilder.plan` on :meth:`plan_key`)."""
        return b.plan(*self.plan_key())

    def done_notice(self, b: Target) -> str:
        """What to say when the input was written completely before."""
        old = b.existing
        rows = old.progress.next_row if old is not None and old.progress else 0
        return (f"{self.label} was already written completely into {b.folder} ({rows:,} "
                f"{self.unit}s); nothing to do. Pass --rebuild to build the index anew.")

    def resuming_notice(self, b: Target, plan: ResumePlan) -> str:
        """What to say when an interrupted write resumes."""
        return (f"resuming at {self.unit} {plan.start_row:,} of {self.label} ({self.unit}s "
                f"before it are committed in {b.folder})")

    def running(self, b: Target, spec: BuildSpec) -> AbstractContextManager[Any]:
        """Held around open, fit and the commit loop (a progress bar, an encoder, a runtime)."""
        return contextlib.nullcontext()

    # ------------------------------------------------------------------ open
    def dim_in(self, b: Target) -> int:
        """Dimension of the vectors this producer writes."""
        raise NotImplementedError

    def open_spec(self, spec: BuildSpec) -> BuildSpec:
        """The resolved spec as the index is opened with it (e.g. the encoder's model name)."""
        return spec

    def fit(self) -> np.ndarray:
        """New index only: the fit sample, float32 of shape (n, dim_in)."""
        raise NotImplementedError

    def fit_reducer(self, reducer: Reducer, X: np.ndarray) -> None:
        """Fit the new reducer on the sample (default ``reducer.fit(X)``)."""
        reducer.fit(X)

    # ------------------------------------------------------------------ the commit loop
    def progress_record(self, b: Target, plan: ResumePlan) -> Progress | None:
        """A producer's own progress record (default: the input :meth:`plan` was given)."""
        return None

    def begun(self, b: Target, plan: ResumePlan) -> None:
        """Called once the running write is recorded (extra state: ``b.on_commit``)."""

    def batches(self, b: Target, start_row: int) -> Iterable[VectorBatch]:
        """The batches from source row ``start_row`` on, in order."""
        raise NotImplementedError

    def advance(self, n: int) -> None:
        """``n`` more source rows were accounted for (a progress bar)."""

    def on_batch(self, next_row: int) -> None:
        """A batch was written; the next source row is ``next_row``."""
