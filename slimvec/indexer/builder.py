"""The one index writer: every way of writing an index (ingest, migrate, the service) uses it.

:class:`IndexBuilder` prepares the folder, creates or reopens the index, plans a resume, sets up
``--keep-full``, runs the commit loop and records checksums, all under the writer lock. A
producer (:class:`~slimvec.indexer.produce.Producer`: what to build, a fit sample, batches from a
resume point, the input's fingerprint) goes through the one write sequence, :meth:`build`; a
long-lived writer (the service) is :meth:`IndexBuilder.open_writer`
(:class:`~slimvec.indexer.live.LiveWriter`)::

    with IndexBuilder(folder, rebuild=False, notify=log.info) as b:
        summary = b.build(producer)        # ingest / migrate / Ray / a test's array

    writer = IndexBuilder.open_writer(folder, spec, fit=sample)   # open once
    writer.write(batch); writer.commit(); ...; writer.close()     # write many, commit, close

The parts live beside it, one module a responsibility: folder safety
(:mod:`slimvec.indexer.folder_safety`), spec resolution (:mod:`slimvec.indexer.spec_resolve`),
the commit protocol (:mod:`slimvec.indexer.commit_loop`) and calibration
(:mod:`slimvec.indexer.depth_calibration`). Files are opened without following links
(:mod:`slimvec.index.safefs`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.buildspec import DEFAULTS, BuildSpec, check_fitted_reducer_metric, check_reducer_metric
from slimvec.errors import ConfigError, DimensionMismatchError, SlimvecError
from slimvec.ids import ID_RULE
from slimvec.index.folder import (
    REDUCER_DIR,
    check_store_dim,
    check_store_trusted,
    reducer_checksum,
    refuse_links_inside,
    store_folder,
    verify_index_files,
)
from slimvec.index.lifecycle import PAYLOAD_INDEX_KEY, declare_payload_index
from slimvec.index.locking import LOCK_NAME, IndexLock
from slimvec.index.manifest import Manifest, Progress
from slimvec.indexer.calibrate import rescore_for_recipe
from slimvec.indexer.commit_loop import CommitLoop
from slimvec.indexer.depth_calibration import DepthCalibration
from slimvec.indexer.folder_safety import (
    NEW_MARKER,
    check_new_store,
    clear_for_new,
    existing_index,
    map_io_error,
    persistence_error,
    remove_failed_new,
)
from slimvec.indexer.keepfull import KeepFullStore, prepare_full
from slimvec.indexer.live import LiveWriter
from slimvec.indexer.produce import Producer
from slimvec.indexer.progress import ResumePlan, plan_run
from slimvec.indexer.spec_resolve import refuse_store_dim, resolve_spec
from slimvec.indexer.writer import IngestSummary
from slimvec.recipe import recipe_rescore
from slimvec.reducers import Reducer, load_reducer, make_reducer

__all__ = ["IndexBuilder", "IndexSpec", "BuildSpec", "DEFAULT_REDUCER", "DEFAULT_STORE", "NEW_MARKER",
           "LiveWriter", "Producer"]

log = logging.getLogger(__name__)
DEFAULT_REDUCER = DEFAULTS["reducer"]  # the defaults table is slimvec.buildspec.DEFAULTS
DEFAULT_STORE = DEFAULTS["store"]


#: the builder's spec is the one build spec (issue 24 item 1); the old name stays for callers
IndexSpec = BuildSpec


class IndexBuilder(DepthCalibration, CommitLoop):
    """Writer of one index folder (see the module docstring).

    Parameters
    ----------
    folder : path
        Index folder (created on :meth:`open` when missing).
    rebuild : bool
        Replace the index in the folder (only files the manifest proves slimvec wrote are deleted).
    notify : callable, optional
        One-line notices for the user; default: log.
    strict : bool
        The first rejected row raises :class:`ConfigError`.
    checkpoint_seconds, checkpoint_batches : float, int
        :meth:`run` commits at least this often (``checkpoint_batches=0``: by time only).
    trust_store : str or bool, optional
        The existing index's store lies outside its folder (``qdrant:URL``): it is only opened
        when the user names it (its spec / location, ``True``, or the same ``spec.store``).
    """

    def __init__(self, folder: str | os.PathLike[str], rebuild: bool = False,
                 notify: Callable[[str], None] | None = None, *, strict: bool = False,
                 checkpoint_seconds: float = 30.0, checkpoint_batches: int = 0,
                 trust_store: str | bool | None = None) -> None:
        self.folder = Path(folder)
        self.trust_store = trust_store
        self.rebuild = rebuild
        self.say = notify or log.info
        self.strict = strict
        self.checkpoint_seconds = checkpoint_seconds
        self.checkpoint_batches = checkpoint_batches
        self.summary = IngestSummary(index=str(self.folder))
        self.manifest: Manifest | None = None
        self.reducer: Reducer | None = None
        self.store: Any = None
        self.on_commit: Callable[[], None] | None = None
        self._target: Any = None
        self._lock: IndexLock | None = None
        self._loaded = False
        self._refused = False
        self._made_lock = False
        self._old: Manifest | None = None  # the existing index's manifest (None: new or rebuild)
        self._doomed: list[Path] = []  # what a new index deletes first (folder_safety)
        self._plan: ResumePlan | None = None
        self._progress_input: dict[str, Any] | None = None
        self._rejects: Any = None
        self._next_row = 0
        self._last_commit = time.monotonic()
        self._batches_since = 0

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> IndexBuilder:
        self._made_lock = not os.path.lexists(self.folder / LOCK_NAME)
        self._made_folder = not os.path.lexists(self.folder)
        self._marked_new = False  # set when this run wrote NEW_MARKER (a new index begins)
        try:
            self._lock = IndexLock(self.folder, exclusive=True).acquire()
        except OSError as exc:
            raise persistence_error(self.folder, exc) from exc
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        closing: BaseException | None = None
        try:
            try:
                self.close()
            except BaseException as err:  # noqa: BLE001 - reported below, after the lock
                closing = err
        finally:
            if self._lock is not None:
                failed_new = exc is not None and self._marked_new and \
                    os.path.lexists(self.folder / NEW_MARKER)
                if failed_new:  # a first build that failed before its first commit
                    remove_failed_new(self.folder)
                if (self._refused or failed_new) and self._made_lock:  # leave the folder as it was
                    (self.folder / LOCK_NAME).unlink(missing_ok=True)
                self._lock.release()
                self._lock = None
                if failed_new and self._made_folder:
                    try:
                        self.folder.rmdir()  # only when empty
                    except OSError:
                        pass
        if closing is not None:
            if exc is None:  # closing failed (a full disk flushing rejects.jsonl): say so
                mapped_close = map_io_error(self.folder, closing)
                if mapped_close is None:
                    raise closing
                raise mapped_close from closing
            # the error that stopped the write is the one to report, not its echo on close
            log.warning("closing %s after an error: %s", self.folder, closing)
        if exc is not None and not isinstance(exc, SlimvecError):
            mapped = map_io_error(self.folder, exc)
            if mapped is not None:
                raise mapped from exc

    def close(self) -> None:
        """Close the rejects file and the store (idempotent; uncommitted batches are not lost
        from the record's point of view: a rerun resumes at the last commit)."""
        try:
            if self._rejects is not None:
                self._rejects.close()
                self._rejects = None
        finally:
            target, self._target, self.store = self._target, None, None
            if target is not None:
                try:
                    self.summary.count = int(target.count())
                finally:
                    target.close()

    # ------------------------------------------------------------------ existing index
    @property
    def existing(self) -> Manifest | None:
        """The manifest of the index already in the folder (``None``: none, or ``rebuild``)."""
        self._load()
        return self._old

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        self._refused = True  # until the folder checks pass
        self._old, self._doomed = existing_index(self.folder, self.rebuild)
        self._refused = False

    def resolve(self, spec: IndexSpec) -> IndexSpec:
        """Fill a spec's unset fields from the existing index (or the defaults) and check that
        the set ones agree with it.

        Raises
        ------
        ConfigError
            The existing index was built with other specs, or text is written into an index
            built from another model's vectors (``encoder: null``), or the reverse.
        """
        return resolve_spec(self.folder, self.existing, spec)

    def plan(self, input_name: Any, fingerprint: dict[str, Any],
             columns: dict[str, Any]) -> ResumePlan:
        """Decide to start, resume (after the last commit) or skip (already done) an input.

        ``input_name`` is the resolved input file (or a source spec); see
        :func:`~slimvec.indexer.progress.plan_run` for what is refused.
        """
        old = self.existing
        if old is not None and old.progress and old.progress.engine and not old.completed:
            raise ConfigError(
                f"{self.folder} has an unfinished --engine {old.progress.engine} ingest of "
                f"{old.progress.input}. Resume it by rerunning that command, or pass --rebuild "
                "to delete the index and start over.")
        progress = _progress_json(old.progress) if old is not None and old.progress else None
        self._plan = plan_run(self.folder, progress, input_name, fingerprint, columns)
        self._progress_input = {"input": str(input_name), "fingerprint": fingerprint,
                                "columns": columns}
        return self._plan

    def done_summary(self, input_label: str) -> IngestSummary:
        """The summary of a run that had nothing to do (:attr:`ResumePlan.already_done`)."""
        old = self.existing
        assert old is not None
        self.summary.input = input_label
        self.summary.already_done = True
        self.summary.count = old.count
        self.summary.next_row = old.progress.next_row if old.progress else 0
        if old.calibration_missing:
            self.say("the last run stopped before calibrating the rescoring depth: calibrating now")
            self.open(BuildSpec.reopen(old), old.dim_in)
            try:
                self.calibrate()
            finally:
                self._target.close()
                self._target = self.store = None
        return self.summary

    # ------------------------------------------------------------------ open / create
    def open(self, spec: IndexSpec, dim_in: int,
             fit: Callable[[], np.ndarray] | None = None,
             fit_reducer: Callable[[Reducer, np.ndarray], None] | None = None) -> Manifest:
        """Create the index (new folder) or reopen and check it (existing index).

        Parameters
        ----------
        spec : IndexSpec
        dim_in : int (of the vectors the producer will write)
        fit : callable, optional
            New index only: returns the fit sample, float32 of shape (n, dim_in). Required then.
        fit_reducer : callable, optional
            Fits the new reducer on the sample (default ``reducer.fit(sample)``); e.g. to also fit
            on training pairs.

        Returns
        -------
        Manifest
        """
        from slimvec.connectors import make_store

        named_store = spec.store
        spec = self.resolve(spec)
        assert spec.reducer is not None and spec.store is not None  # resolve() sets them
        unfitted = make_reducer(spec.reducer)  # fail fast on bad specs before the fit
        old = self.existing
        if old is None:  # a store that cannot hold the reducer's output is refused before the fit
            refuse_store_dim(spec.store, getattr(unfitted, "n_components", None), self.folder)
            check_reducer_metric(unfitted, str(spec.metric), f"{self.folder}")
        refuse_links_inside(self.folder)
        if old is not None:
            check_store_trusted(self.folder, old, True if named_store else self.trust_store)
            if old.dim_in != int(dim_in):
                raise DimensionMismatchError(
                    f"reducer input of {self.folder} vs the vectors written now", old.dim_in,
                    dim_in, "The index was built with another encoder or source; use the same "
                    "one, another --index folder, or --rebuild.")
            verify_index_files(self.folder, old)
            reducer = load_reducer(self.folder / REDUCER_DIR)
            if reducer.n_features_in_ != int(dim_in):
                raise DimensionMismatchError(f"reducer input of {self.folder}",
                                             reducer.n_features_in_, dim_in)
            store = make_store(old.store, store_folder(self.folder)).open()
            check_store_dim(self.folder, store, reducer)
            full = prepare_full(self.folder, old, store, spec.keep_full, dim_in, new=False)
            self.manifest = old
        else:
            if fit is None:
                raise ConfigError(f"{self.folder} holds no index yet and no fit sample was given.")
            store = make_store(spec.store, store_folder(self.folder))
            check_new_store(self.folder, store)
            self._clear_for_new()
            t0 = time.perf_counter()
            sample = np.asarray(fit(), dtype=np.float32)
            if sample.ndim != 2 or sample.shape[1] != int(dim_in) or not len(sample):
                raise ConfigError(f"The fit sample for {self.folder} has shape {sample.shape}; "
                                  f"expected (n > 0, {dim_in}).")
            reducer = make_reducer(spec.reducer)
            (fit_reducer or (lambda r, x: r.fit(x)))(reducer, sample)
            check_fitted_reducer_metric(reducer, str(spec.metric), f"{self.folder}")
            self.summary.fit_seconds = time.perf_counter() - t0
            reducer.save(self.folder / REDUCER_DIR)
            self.manifest = Manifest(
                dim_in=int(dim_in), dim_out=int(reducer.n_components_), reducer=reducer.spec,
                store=str(spec.store), encoder=spec.encoder, encoder_name=spec.encoder_name,
                text_column=spec.text_column, id_column=spec.id_column, source=spec.source,
                metric=str(spec.metric), id_rule=ID_RULE if spec.id_rule is None else int(spec.id_rule),
                encoding=spec.encoding,
                sha256={f"{REDUCER_DIR}/config.json": reducer_checksum(self.folder)})
            self.manifest.recipe = spec.recipe
            self.manifest.rescore = rescore_for_recipe(spec.recipe, store, reducer, None) \
                if recipe_rescore(spec.recipe) not in (None, "auto") else None
            full = prepare_full(self.folder, self.manifest, store, spec.keep_full, dim_in, new=True)
            store.create(reducer.n_components_, self.manifest.metric)
            self.summary.created = True
        self.reducer, self.store = reducer, store
        self._declare(spec.payload_index or {})  # before the first document
        self._target = (KeepFullStore(store, full, int(dim_in), spec.source or str(self.folder))
                        if self.manifest.full else store)
        return self.manifest

    def _declare(self, payload_index: dict[str, str]) -> None:
        """Build and record the spec's payload indexes the index lacks (:attr:`BuildSpec.payload_index`)."""
        declared = self._opened().extra.get(PAYLOAD_INDEX_KEY) or {}
        for field, kind in payload_index.items():
            if declared.get(field) != kind:
                declare_payload_index(self, field, kind)

    def _clear_for_new(self) -> None:
        """Delete the old index (rebuild) or a crashed first run's leftovers; mark the new one."""
        clear_for_new(self.folder, self._doomed)
        self._marked_new = True
        self._doomed = []


    # ------------------------------------------------------------------ the two entry points
    def build(self, producer: Producer) -> IngestSummary:
        """The one write sequence: a producer's input into this (entered) builder's index.

        Asks the producer what to build and resolves it against the index in the folder, plans
        the run (start, resume after the last commit, or nothing to do), then, inside
        ``producer.running``, opens (fitting a new index on ``producer.fit``), records the
        running write and runs the commit loop over ``producer.batches(start_row)``; see
        :mod:`slimvec.indexer.produce`.

        Returns
        -------
        IngestSummary
            ``already_done`` when the input was written completely before; ``interrupted``
            when SIGINT / SIGTERM stopped the loop at a batch boundary (rerun to resume).
        """
        spec = self.resolve(producer.build_spec(self))
        producer.resolved(self, spec)
        plan = producer.plan(self)
        self.summary.input = producer.label
        if plan.already_done:
            self.say(producer.done_notice(self))
            return self.done_summary(producer.label)
        with producer.running(self, spec):
            t_start = time.perf_counter()  # what running() loads (a model, a runtime) excluded
            self.open(producer.open_spec(spec), producer.dim_in(self), producer.fit,
                      producer.fit_reducer)
            if plan.resuming:
                self.say(producer.resuming_notice(self, plan))
            self.begin(plan, producer.progress_record(self, plan))
            producer.begun(self, plan)
            t_stream = time.perf_counter()
            summary = self.run(producer.batches(self, plan.start_row), producer.advance,
                               producer.on_batch)
        summary.seconds = time.perf_counter() - t_stream
        summary.total_seconds = time.perf_counter() - t_start
        return summary

    @classmethod
    def open_writer(cls, folder: str | os.PathLike[str], spec: BuildSpec | None = None, *,
                    fit: np.ndarray | None = None, trust_store: str | bool | None = None,
                    notify: Callable[[str], None] | None = None) -> LiveWriter:
        """Open a long-lived writer (:class:`~slimvec.indexer.live.LiveWriter`) on an index.

        Parameters
        ----------
        folder : path
            The index folder.
        spec : BuildSpec, optional
            ``None``: reopen the index in the folder as it was built. Given: create a new index
            fitted on ``fit`` and commit it at once (a restart reopens it).
        fit : ndarray, optional
            With ``spec``: the fit sample, float32 of shape (n, dim_in).
        trust_store : str or bool, optional
            See :class:`IndexBuilder` (reopening an index whose store lies outside its folder).
        notify : callable, optional
            One-line notices; default: log.

        Raises
        ------
        ConfigError
            ``spec`` is ``None`` and the folder holds no index, or ``spec`` without ``fit``.
        """
        b = cls(folder, notify=notify, trust_store=trust_store)
        b.__enter__()
        try:
            if spec is None:
                old = b.existing
                if old is None:
                    raise ConfigError(f"{b.folder} holds no index.")
                b.open(BuildSpec(encoder=old.encoder, text_column=old.text_column,
                                 id_column=old.id_column), old.dim_in)
            else:
                if fit is None:
                    raise ConfigError(f"{b.folder}: a new index needs a fit sample (fit=).")
                sample = np.asarray(fit)
                b.open(spec, int(sample.shape[1]), fit=lambda: sample)
                b.commit()  # the manifest exists from now on: a restart reopens the index
        except BaseException as exc:
            b.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return LiveWriter(b)


# ---------------------------------------------------------------------- helpers
def _progress_json(p: Progress) -> dict[str, Any]:
    return {"input": p.input, "fingerprint": p.fingerprint, "columns": p.columns,
            "next_row": p.next_row, "state": p.state, "rejects_bytes": p.rejects_bytes}
