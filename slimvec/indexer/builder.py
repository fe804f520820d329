"""The one index writer: every way of writing an index (ingest, migrate, the service) uses it.

:class:`IndexBuilder` prepares the folder, creates or reopens the index, plans a resume, sets up
``--keep-full``, runs the commit loop and records checksums, all under the writer lock. Producers
only turn their input into :class:`~slimvec.indexer.writer.VectorBatch` es and provide a fit
sample for a new index::

    spec = BuildSpec(reducer="pca:96", store="qdrant-edge", encoder="minilm")
    with IndexBuilder(folder, rebuild=False, notify=log.info) as b:
        b.open(spec, dim_in=384, fit=lambda: sample_vectors)
        summary = b.run(batches)          # ingest / migrate: the commit loop over an iterator
        # or, a long-lived writer:  b.write(batch); b.commit(); ... b.finish()

A commit is, in this order: ``rejects.jsonl`` flushed and fsynced; ``store.flush()`` (FAISS /
hnswlib written to a temporary file, fsynced and renamed; Qdrant Edge flushed; remote Qdrant
acknowledged every upsert); extra state (``on_commit``, e.g. the duplicate tracker); the
manifest's progress record written atomically. A crash anywhere leaves the store at or ahead of
the record, never behind, and ids are deterministic, so rows re-read after a resume overwrite
instead of duplicating.

Folder safety: a folder without a manifest is only cleaned of what a crashed first run of this
module provably left (listed in ``.slimvec-new`` before anything was created); anything else in a
non-index folder (``.git/``, ``.env``, a user's ``store/``) is refused, never deleted. ``rebuild``
deletes only what the manifest proves slimvec wrote, after every check passed. Files are opened
without following links (:mod:`slimvec.indexer.safefs`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from slimvec.buildspec import (
    DEFAULTS, BuildSpec, check_fitted_reducer_metric, check_metric, check_reducer_metric, default_reducer,
)
from slimvec.errors import ConfigError, DimensionMismatchError, PersistenceError, SlimvecError
from slimvec.ids import ID_RULE
from slimvec.connectors.fullvectors import FULL_DIR
from slimvec.indexer.calibrate import rescore_for_recipe
from slimvec.indexer.calibration_queries import (
    CALIBRATION_QUERIES_FILE, load_calibration_queries, save_calibration_queries,
)
from slimvec.indexer.checks import STATE_DB, split_bad_vectors
from slimvec.indexer.index import (
    REDUCER_DIR, STORE_DIR, check_store_dim, check_store_trusted, reducer_checksum,
    refuse_links_inside, store_checksums, store_folder, verify_index_files,
)
from slimvec.indexer.interrupt import StopFlag
from slimvec.indexer.keepfull import KeepFullStore, check_keep_full, check_recipe, prepare_full
from slimvec.indexer.locking import LOCK_NAME, CommitGuard, IndexLock
from slimvec.persistence import sha256_file
from slimvec.indexer.manifest import MANIFEST, Manifest, Progress
from slimvec.indexer.progress import ResumePlan, plan_run, truncate_file
from slimvec.indexer.records import RECORDS
from slimvec.indexer.safefs import open_append_text, refuse_link
from slimvec.indexer.writer import REJECTS, IngestSummary, VectorBatch, write_batch
from slimvec.recipe import recipe_rescore
from slimvec.reducers import Reducer, load_reducer, make_reducer

__all__ = ["IndexBuilder", "IndexSpec", "BuildSpec", "DEFAULT_REDUCER", "DEFAULT_STORE", "NEW_MARKER"]

log = logging.getLogger(__name__)
DEFAULT_REDUCER = DEFAULTS["reducer"]  # the defaults table is slimvec.buildspec.DEFAULTS
DEFAULT_STORE = DEFAULTS["store"]
#: written (fsynced) before a new index creates anything; lists what a crash may leave behind
NEW_MARKER = ".slimvec-new"
STORE_MARKER = "slimvec_store.json"  # every local store writes it at create
_STATE_FILES = (STATE_DB, STATE_DB + "-wal", STATE_DB + "-shm",
                RECORDS, RECORDS + "-wal", RECORDS + "-shm")  # records: ingest --sync
_IO_HINTS = ("No space left", "Read-only file system", "Permission denied", "Disk quota",
             "File too large", "disk I/O error", "database or disk is full",
             "attempt to write a readonly database")  # the last three: SQLite (payloads, state)


#: the builder's spec is the one build spec (issue 24 item 1); the old name stays for callers
IndexSpec = BuildSpec


class IndexBuilder:
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
        self._plan: ResumePlan | None = None
        self._progress_input: dict[str, Any] | None = None
        self._rejects: Any = None
        self._next_row = 0
        self._last_commit = time.monotonic()
        self._batches_since = 0

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "IndexBuilder":
        self._made_lock = not os.path.lexists(self.folder / LOCK_NAME)
        self._made_folder = not os.path.lexists(self.folder)
        self._marked_new = False  # set when this run wrote NEW_MARKER (a new index begins)
        try:
            self._lock = IndexLock(self.folder, exclusive=True).acquire()
        except OSError as exc:
            raise _persistence(self.folder, exc) from exc
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.close()
        finally:
            if self._lock is not None:
                failed_new = exc is not None and self._marked_new and \
                    os.path.lexists(self.folder / NEW_MARKER)
                if failed_new:  # a first build that failed before its first commit
                    self._remove_failed_new()
                if (self._refused or failed_new) and self._made_lock:  # leave the folder as it was
                    (self.folder / LOCK_NAME).unlink(missing_ok=True)
                self._lock.release()
                self._lock = None
                if failed_new and self._made_folder:
                    try:
                        self.folder.rmdir()  # only when empty
                    except OSError:
                        pass
        if exc is not None and not isinstance(exc, SlimvecError):
            mapped = _map_io_error(self.folder, exc)
            if mapped is not None:
                raise mapped from exc

    def _remove_failed_new(self) -> None:
        """Delete what this run created for a new index that failed before its first commit
        (the entries its ``.slimvec-new`` marker lists, the marker last): a failed first build
        leaves the folder as it found it (issue 27 item 6). A killed run still leaves the marker,
        and the next run cleans up after it."""
        try:
            for p in _crash_leftovers(self.folder):
                if p.name == NEW_MARKER:
                    continue
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                elif os.path.lexists(p):
                    p.unlink()
            (self.folder / NEW_MARKER).unlink(missing_ok=True)
        except (OSError, SlimvecError) as exc:  # never hide the error that stopped the build
            log.warning("could not remove the failed build's files from %s: %s", self.folder, exc)

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
        self._refused = True  # until the folder checks below pass
        for name in (MANIFEST, REJECTS, *_STATE_FILES, NEW_MARKER, CALIBRATION_QUERIES_FILE):
            refuse_link(self.folder / name)
        if os.path.lexists(self.folder / MANIFEST):
            old = Manifest.read(self.folder) if not self.rebuild else _lenient_manifest(self.folder)
            if not self.rebuild:
                self._old = old
            else:
                self._doomed = _own_entries(self.folder, old)
        else:
            self._doomed = _crash_leftovers(self.folder)
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
        from slimvec.connectors import canonical_store_spec

        old = self.existing
        check_keep_full(spec.keep_full)
        check_recipe(spec)
        if spec.metric is not None:
            check_metric(spec.metric, f"the metric asked for {self.folder}")
        if old is None:
            metric = spec.metric or DEFAULTS["metric"]
            return replace(spec, reducer=spec.reducer or default_reducer(metric), metric=metric,
                           store=canonical_store_spec(spec.store or DEFAULTS["store"]))
        diffs = []
        if old.encoder is None and spec.encoder is not None:
            raise ConfigError(
                f"{self.folder} already holds an index built with encoder None (asked "
                f"{spec.encoder!r}): 'slimvec migrate' built it from vectors of another model, and "
                "text encoded now would mix two vector spaces. Search it with vectors of the "
                "original model, ingest text into another --index folder, or --rebuild it.")
        if old.encoder is not None and spec.encoder is None:
            diffs.append(f"encoder {old.encoder!r} (a migration has none)")
        elif spec.encoder is not None and old.encoder != spec.encoder:
            diffs.append(f"encoder {old.encoder!r} (asked {spec.encoder!r})")
        if spec.reducer is not None and old.reducer not in (spec.reducer,
                                                            make_reducer(spec.reducer).spec):
            diffs.append(f"reducer {old.reducer!r} (asked {spec.reducer!r})")
        if spec.store is not None and old.store != canonical_store_spec(spec.store):
            diffs.append(f"store {old.store!r} (asked {spec.store!r})")
        had_full = old.full.dtype if old.full else None
        if spec.keep_full is not None and had_full != spec.keep_full:
            diffs.append(f"full vectors {had_full!r} (asked --keep-full {spec.keep_full!r})")
        if spec.recipe is not None and old.recipe != spec.recipe:
            diffs.append(f"recipe {old.recipe!r} (asked {spec.recipe!r})")
        if spec.metric is not None and old.metric != spec.metric:
            diffs.append(f"metric {old.metric!r} (asked {spec.metric!r})")
        if spec.id_rule is not None and old.id_rule != spec.id_rule:
            diffs.append(f"id rule {old.id_rule} (asked {spec.id_rule})")
        if diffs:
            raise ConfigError(
                f"{self.folder} already holds an index built with {', '.join(diffs)}. Use the same "
                "specs to add to it, another --index folder, or --rebuild to delete it and build "
                "anew.")
        return replace(spec, reducer=old.reducer, store=old.store, encoder=old.encoder,
                       keep_full=had_full, recipe=old.recipe, metric=old.metric,
                       id_rule=old.id_rule)

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
        dim_in : int
            Dimension of the vectors the producer will write.
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
        unfitted = make_reducer(spec.reducer)  # fail fast on bad specs before the fit
        old = self.existing
        if old is None:  # a store that cannot hold the reducer's output is refused before the fit
            _refuse_store_dim(spec.store, getattr(unfitted, "n_components", None), self.folder)
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
            self._check_new_store(store)
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
                sha256={f"{REDUCER_DIR}/config.json": reducer_checksum(self.folder)})
            self.manifest.recipe = spec.recipe
            self.manifest.rescore = rescore_for_recipe(spec.recipe, store, reducer, None) \
                if recipe_rescore(spec.recipe) not in (None, "auto") else None
            full = prepare_full(self.folder, self.manifest, store, spec.keep_full, dim_in, new=True)
            store.create(reducer.n_components_, self.manifest.metric)
            self.summary.created = True
        self.reducer, self.store = reducer, store
        self._target = (KeepFullStore(store, full, int(dim_in), spec.source or str(self.folder))
                        if self.manifest.full else store)
        return self.manifest

    def _check_new_store(self, store: Any) -> None:
        """Before anything is deleted or created: an external store location must be free."""
        location = Path(str(store.location))
        if str(location) == str(store_folder(self.folder)):
            return
        exists = False
        if getattr(store, "local", True):
            exists = location.exists() and (not location.is_dir() or any(location.iterdir()))
        else:
            try:
                store.open()
                exists = True
                store.close()
            except Exception:  # no such collection (or unreachable: create will say so)
                exists = False
        if exists:
            raise ConfigError(
                f"The store {store.location} named by the store spec already holds data. slimvec "
                "does not delete or overwrite an external store; nothing was changed in "
                f"{self.folder}. Delete that store yourself, or choose another location.")

    def _clear_for_new(self) -> None:
        """Delete the old index (rebuild) or a crashed first run's leftovers; mark the new one."""
        doomed = getattr(self, "_doomed", [])
        self.folder.mkdir(parents=True, exist_ok=True)
        if (self.folder / MANIFEST) in doomed:
            (self.folder / MANIFEST).unlink()  # first, so a crash mid-wipe leaves no half index
        for p in doomed:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif os.path.lexists(p):
                p.unlink()
        marker = self.folder / NEW_MARKER
        names = [REDUCER_DIR, STORE_DIR, "full", REJECTS, *_STATE_FILES, NEW_MARKER]
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as fh:
            json.dump({"created_by": "slimvec", "names": names}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        self._marked_new = True
        self._doomed = []

    # ------------------------------------------------------------------ writing
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
        if self.manifest is None:
            raise ConfigError("IndexBuilder.open() must be called before writing.")
        plan = plan or self._plan or ResumePlan()
        if plan.resuming:
            truncate_file(self.folder / REJECTS, plan.rejects_bytes)
            self.summary.resumed_from = plan.start_row
        self._rejects = open_append_text(self.folder / REJECTS)
        self._rejects.seek(0, os.SEEK_END)
        if progress is None:
            info = self._progress_input or {"input": None, "fingerprint": None, "columns": {}}
            progress = Progress(input=info["input"], fingerprint=info["fingerprint"],
                                columns=info["columns"])
        self.manifest.progress = replace(
            progress, next_row=plan.start_row, state="running",
            rejects_bytes=int(self._rejects.tell()),
            started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.manifest.store_sha256 = {}  # store files are about to change
        self.manifest.write(self.folder)
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
        reducer, dim = self.reducer, int(self.manifest.dim_in)
        if batch.reduced:
            if isinstance(self._target, KeepFullStore):
                if batch.full is None:
                    raise ConfigError(
                        f"{self.folder} keeps full vectors (--keep-full) but this producer sends "
                        "only reduced vectors; send their full vectors too (VectorBatch.full), or "
                        "ingest into an index without --keep-full.")
                batch = _with_bad_full_rows_marked(batch, dim)
                self._target.stage(batch.ids, batch.full)
            reducer, dim = _Prereduced(), int(self.manifest.dim_out)
        elif isinstance(self._target, KeepFullStore):
            self._target.stage(batch.ids, batch.vectors)
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
        if next_row is not None:
            self._next_row = int(next_row)
        self._rejects.flush()
        os.fsync(self._rejects.fileno())
        self._target.flush()
        if self.on_commit is not None:
            self.on_commit()
        progress = self.manifest.progress
        progress.next_row = self._next_row
        progress.rejects_bytes = int(self._rejects.tell())
        progress.state = state
        self.manifest.count = int(self._target.count())
        self.manifest.write(self.folder)
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
        self._target.finalize()
        self.commit(state="done")
        self.summary.count = self.manifest.count
        calibrated = self.calibrate(write=False) if recalibrate or self.calibration_due() \
            else False
        self._target.close()
        self._target = self.store = None
        sums = store_checksums(self.folder, self.manifest)
        if sums or calibrated:
            self.manifest.store_sha256 = sums
            self.manifest.write(self.folder)

    @property
    def auto_rescore(self) -> bool:
        """True when the index's recipe calibrates its rescoring depth (``rescore=auto``)."""
        return self.manifest is not None and self.manifest.auto_rescore

    def calibration_due(self, growth: float = 2.0) -> bool:
        """True when an ``auto`` depth was never calibrated, or the index has grown ``growth``
        times since (the depth needed grows with N); a long-lived writer (the service) asks
        after its commits."""
        if not self.auto_rescore:
            return False
        count = int(self.manifest.count)
        done = self.manifest.rescore
        return count >= 2 and (done is None or count >= growth * max(done.n_corpus, 1))

    def calibrate(self, write: bool = True, queries: np.ndarray | None = None) -> bool:
        """Calibrate a ``rescore=auto`` depth on the committed index (``finish`` does it; the
        service also does it as the index grows); records it in the manifest, written when
        ``write``. Returns whether anything was calibrated.

        Parameters
        ----------
        write : bool
            Write the manifest now.
        queries : ndarray, optional
            Real query vectors (float32, (n, dim_in)) to calibrate on from now on: stored in the
            folder (:mod:`slimvec.indexer.calibration_queries`) and used by every later
            calibration of this index. Default: the stored ones if any, else corpus vectors.

        Raises
        ------
        ConfigError
            ``queries`` given for an index of fewer than two vectors.
        """
        if not self.auto_rescore:
            return False
        m = self.manifest
        given = queries is not None
        if not given and m.rescore is not None and m.rescore.queries is not None:
            queries = load_calibration_queries(self.folder, int(m.dim_in))
        self.say("calibrating the rescoring depth (rescore=auto) on "
                 + (f"{len(queries):,} {'given' if given else 'stored'} queries"
                    if queries is not None else "a sample of the index"))
        rescore = rescore_for_recipe(
            m.recipe, self.store, self.reducer,
            self._target.full if isinstance(self._target, KeepFullStore) else None,
            queries=queries)
        if given and rescore is None:  # fewer than two vectors: nothing to find for them
            raise ConfigError(f"{self.folder}: {m.count} vector(s) committed, too few to calibrate "
                              "on; add documents first.")
        if rescore is not None and queries is not None:
            rescore = replace(rescore, queries=CALIBRATION_QUERIES_FILE)
            if given:  # kept only once they calibrated: a refused calibration leaves no file
                path = save_calibration_queries(self.folder, queries)
                m.sha256[CALIBRATION_QUERIES_FILE] = sha256_file(path)
        if rescore is not None and rescore.calibrated:
            self.say(f"rescoring depth {rescore.depth}: neighbour recall@{rescore.k} "
                     f"{rescore.recall:.4f} on {rescore.n_queries:,} "
                     + ("given queries" if queries is not None else
                        "corpus vectors (queries unlike the corpus may need more: "
                        "slimvec calibrate --queries FILE, docs/recipes.md)"))
            if rescore.reached is False:
                self.say(f"warning: rescore=auto {rescore.status}")
        m.rescore = rescore
        if write:
            m.write(self.folder)
        return True

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
                if self.due():
                    self.commit()
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


# ---------------------------------------------------------------------- helpers
def _with_bad_full_rows_marked(batch: VectorBatch, dim_in: int) -> VectorBatch:
    """A reduced batch whose rows with a bad full vector (NaN, inf, wrong length) get a NaN
    reduced vector too, so the commit loop rejects them instead of upserting a row whose full
    vector cannot be kept."""
    full = batch.full
    n = len(batch.ids)
    if full is None or (isinstance(full, np.ndarray) and full.shape == (n, dim_in)
                        and np.isfinite(full).all()):
        return batch
    if len(full) != n:
        raise ConfigError(f"a reduced batch of {n} rows came with {len(full)} full vectors; the "
                          "producer must send one full vector per row.")
    good, _, _ = split_bad_vectors(full, dim_in, None, batch.source)
    vectors = np.array(batch.vectors, dtype=np.float32)  # a copy: the producer's array is kept
    vectors[~good] = np.nan
    return replace(batch, vectors=vectors)


class _Prereduced:
    """The reducer of a ``reduced`` batch: the producer applied the real one already."""

    def transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=np.float32)


def _progress_json(p: Progress) -> dict[str, Any]:
    return {"input": p.input, "fingerprint": p.fingerprint, "columns": p.columns,
            "next_row": p.next_row, "state": p.state, "rejects_bytes": p.rejects_bytes}


def _lenient_manifest(folder: Path) -> Manifest | None:
    """The manifest of an index about to be rebuilt; ``None`` when it cannot be read (then only
    the fixed names slimvec always writes count as its own)."""
    try:
        return Manifest.read(folder)
    except PersistenceError:
        return None


def _own_entries(folder: Path, manifest: Manifest | None) -> list[Path]:
    """What ``rebuild`` may delete: files the manifest proves slimvec wrote. Anything else in the
    folder is refused (listed), never deleted."""
    own = {MANIFEST, REDUCER_DIR, REJECTS, LOCK_NAME, NEW_MARKER, CALIBRATION_QUERIES_FILE,
           *_STATE_FILES}
    if manifest is None:  # unreadable manifest: a store folder proves itself by its own marker
        if (store_folder(folder) / STORE_MARKER).is_file():
            own.add(STORE_DIR)
        if (folder / FULL_DIR / "state.json").is_file():  # FullVectors' own record
            own.add(FULL_DIR)
    else:
        from slimvec.connectors import make_store

        try:
            loc = make_store(manifest.store, store_folder(folder)).location
        except SlimvecError:
            loc = None
        if loc is not None and Path(loc) == store_folder(folder):
            own.add(STORE_DIR)
        if manifest.full is not None and manifest.full.dir:
            own.add(Path(manifest.full.dir).parts[0])
    return _entries_or_refuse(folder, own, "holds files this index's manifest does not account "
                              "for")


def _crash_leftovers(folder: Path) -> list[Path]:
    """What a first run killed before its first commit left (listed in its marker file)."""
    if not folder.is_dir():
        return []
    own = {LOCK_NAME}
    marker = folder / NEW_MARKER
    if marker.is_file() and not marker.is_symlink():
        try:
            names = json.loads(marker.read_text(encoding="utf-8")).get("names", [])
        except (ValueError, OSError, AttributeError):
            names = []
        own |= {str(n) for n in names if isinstance(n, str) and "/" not in n and n not in ("..",)}
    return _entries_or_refuse(folder, own, "is not empty and is not a slimvec index")


def _entries_or_refuse(folder: Path, own: set[str], why: str) -> list[Path]:
    entries = list(folder.iterdir()) if folder.is_dir() else []
    strangers = sorted(p.name for p in entries if p.name not in own)
    if strangers:
        raise ConfigError(
            f"{folder} {why} (it holds {', '.join(strangers[:5])}"
            f"{'...' if len(strangers) > 5 else ''}); nothing was deleted. Choose an empty or new "
            "--index folder, or move those files away.")
    return [p for p in entries if p.name != LOCK_NAME]


def _persistence(folder: Path, exc: OSError) -> PersistenceError:
    where = f" ({exc.filename})" if exc.filename else ""
    return PersistenceError(
        f"Cannot write the index {folder}: {exc.strerror or exc}{where}. Check that the folder "
        "is writable and the disk is not full, then rerun the same command to resume.")


def _map_io_error(folder: Path, exc: BaseException) -> PersistenceError | None:
    """Store engines report I/O failures as their own exceptions: map them for the user."""
    if isinstance(exc, OSError):
        return _persistence(folder, exc)
    if isinstance(exc, Exception) and any(h in str(exc) for h in _IO_HINTS):
        return PersistenceError(
            f"The store of {folder} could not write: {str(exc).splitlines()[0][:300]}. Check "
            "that the folder is writable and the disk is not full, then rerun the same "
            "command to resume.")
    return None


def _refuse_store_dim(store_spec: Any, n_out: Any, folder: Path) -> None:
    """:class:`ConfigError` when the store cannot hold ``n_out``-d vectors (FAISS ``PQ7`` at 8
    dimensions, an IVF whose centroids alone would take gigabytes...), before anything is built."""
    from slimvec.connectors import store_dim_problem

    if isinstance(n_out, int) and not isinstance(n_out, bool):
        problem = store_dim_problem(store_spec, n_out)
        if problem:
            raise ConfigError(f"{problem}. Nothing was created in {folder}: choose a reducer size "
                              "and a store spec that fit together.")
