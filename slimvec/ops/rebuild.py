"""Change an index's recipe without re-embedding: refit on the kept full vectors, swap atomically.

``rebuild(INDEX, "pca:128|faiss:HNSW32|rescore=auto")``:

1. refuses an index that keeps no full vectors (and says how to get them), or a recipe whose
   reducer cannot take the kept vectors' dimension;
2. writes a journal ``.INDEX.rebuild.json`` beside the index (fsynced), then builds the new index
   in ``.INDEX.rebuild-new`` beside it through the one writer
   (:class:`~slimvec.indexer.builder.IndexBuilder`): the new reducer fitted on a uniform sample of
   the kept full vectors (``none``: the identity, the vectors as they are), every live kept vector
   re-reduced in batches with its id and payload (deleted ones never reach the new store), the full
   vectors kept again (the recipe's ``keep_full``, default the old index's dtype), commits at
   checkpoints and ``rescore=auto`` calibrated exactly as an ingest does;
3. swaps the two folders in one ``renameat2(RENAME_EXCHANGE)`` (two renames where the file system
   lacks it), fsyncs the parent, and only then deletes the old index.

The old index stays searchable the whole time: the rebuild reads it under a shared lock (readers
keep reading, writers wait), and an open reader keeps its files after the swap (they are renamed,
then unlinked, never rewritten). A crash at any point leaves the old or the new index complete in
place; rerunning the same command resumes the build from its last commit, or finishes the swap.
A rerun with another recipe discards the unfinished build first.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import ConfigError, DimensionMismatchError, IndexBusyError, PersistenceError, SlimvecError
from slimvec.index.kept import KeptVectors, open_kept
from slimvec.index.locking import IndexLock
from slimvec.index.manifest import MANIFEST, Manifest
from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.writer import VectorBatch
from slimvec.persistence import allocated_bytes, fsync_dir, read_json, write_json_atomic
from slimvec.sources.checks import norm_outliers

__all__ = ["rebuild", "RebuildSummary", "finish_pending_rebuild", "PHASES",
           "RebuildInterrupted", "refuse_without_kept"]

log = logging.getLogger(__name__)

#: what :func:`rebuild` reports to ``on_phase``, in order
PHASES = ("reading", "fitting", "writing", "calibrating", "swapping", "swapped", "done")


@dataclass
class RebuildSummary:
    """What :func:`rebuild` did.

    Attributes
    ----------
    index : str
    old_recipe, new_recipe : str or None
    documents : int
        Vectors in the new index (the old one's count).
    bytes_before, bytes_after : int
        Allocated bytes of the index folder before and after.
    seconds, fit_seconds : float
        Wall time of the whole rebuild, and of the reducer fit.
    resumed_from : int or None
        Row the build resumed from after an interruption.
    old_removed : bool
        False when a reader still held the old index's lock: it stays in ``.INDEX.rebuild-new``
        and the next rebuild (or :func:`finish_pending_rebuild`) removes it.
    rescore_depth : int or None
        The new index's default rescoring depth (calibrated for ``rescore=auto``).
    """

    index: str
    old_recipe: str | None
    new_recipe: str
    documents: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    seconds: float = 0.0
    fit_seconds: float = 0.0
    resumed_from: int | None = None
    old_removed: bool = True
    rescore_depth: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict."""
        return asdict(self)


class RebuildInterrupted(SlimvecError):
    """SIGINT / SIGTERM stopped the build at a commit; rerunning resumes it."""


def _paths(index_dir: Path) -> tuple[Path, Path]:
    """(new folder, journal) beside the index."""
    return (index_dir.parent / f".{index_dir.name}.rebuild-new",
            index_dir.parent / f".{index_dir.name}.rebuild.json")


def rebuild(index_dir: str | os.PathLike[str], recipe: str, *, sample: int = 10_000,
            batch_size: int = 2048, seed: int = 0, progress: bool = False,
            checkpoint_seconds: float = 30.0,
            notify: Callable[[str], None] | None = None,
            on_phase: Callable[[str, int], None] | None = None,
            store: Any = None, swap_wait: float = 30.0) -> RebuildSummary:
    """Rebuild the index at ``index_dir`` with ``recipe`` from its kept full vectors.

    Parameters
    ----------
    index_dir : path
        An index that keeps its full vectors (``keep_full`` in its recipe, ``--keep-full``).
    recipe : str
        The new recipe (string ``REDUCER|STORE[|rescore=...,keep_full=...]`` or recipe JSON
        file); the store is created inside the index folder. Without ``keep_full`` the old
        index's dtype is kept.
    sample : int
        Kept vectors sampled uniformly to fit the new reducer.
    batch_size : int
        Vectors re-reduced and written per batch.
    seed : int
        Seed of the fit sample.
    progress : bool
        Show a progress bar.
    checkpoint_seconds : float
        Commit at least this often (a killed rebuild resumes from the last commit).
    notify : callable, optional
        One-line notices; default: log.
    on_phase : callable, optional
        Called with ``(phase, rows written)`` as the rebuild moves through :data:`PHASES`.
    store : VectorStore, optional
        The index's store, already open by the caller (the service's read-only index): Qdrant
        full vectors are read through it (a Qdrant Edge shard cannot be opened twice).
    swap_wait : float
        Seconds to wait at the swap for readers holding the old index's lock (Qdrant stores:
        ``slimvec search``, a server); then :class:`IndexBusyError` and a rerun only swaps.

    Returns
    -------
    RebuildSummary

    Raises
    ------
    ConfigError
        No kept full vectors, a bad recipe, an external store, or an unfinished rebuild to
        another recipe that cannot be discarded.
    DimensionMismatchError
        The recipe's reducer cannot take the kept vectors' dimension.
    IndexBusyError
        Another process is writing the index.
    """
    t0 = time.perf_counter()
    index_dir = Path(index_dir)
    say = notify or log.info
    phase = on_phase or (lambda name, rows: None)
    finished = finish_pending_rebuild(index_dir, recipe, notify=say)
    if finished is not None:
        return finished
    new_dir, journal = _paths(index_dir)
    _refuse_leftovers(new_dir, journal)
    old = Manifest.read(index_dir)
    spec = _new_spec(index_dir, old, recipe)
    summary = RebuildSummary(str(index_dir), old.recipe, str(spec.recipe),
                             bytes_before=allocated_bytes(index_dir))
    with IndexLock(index_dir, exclusive=False) as lock:  # readers go on, writers wait
        _build_new(index_dir, old, spec, store, summary, say, phase, progress=progress,
                   sample=sample, batch_size=batch_size, seed=seed,
                   checkpoint_seconds=checkpoint_seconds)
        summary.documents = int(Manifest.read(new_dir).count)
        phase("swapping", summary.documents)  # (the service closes its reader of the old one)
        _exclusive_for_swap(lock, index_dir, swap_wait, summary.documents)
        _write_journal(journal, "swapping", index_dir, spec.recipe, new_dir,
                       new_ino=os.stat(new_dir).st_ino)
        _exchange(index_dir, new_dir)
        phase("swapped", summary.documents)
    summary.old_removed = _cleanup(index_dir, new_dir, journal, say)
    m = Manifest.read(index_dir)
    summary.rescore_depth = m.rescore.depth if m.rescore else None
    summary.bytes_after = allocated_bytes(index_dir)
    summary.seconds = time.perf_counter() - t0
    phase("done", summary.documents)
    return summary


def _build_new(index_dir: Path, old: Manifest, spec: IndexSpec, store: Any,
               summary: RebuildSummary, say: Callable[[str], None],
               phase: Callable[[str, int], None], *, progress: bool, sample: int,
               batch_size: int, seed: int, checkpoint_seconds: float) -> None:
    """Build (or resume) the new index beside the old one, journal first; a build that failed
    before its first commit leaves nothing behind."""
    from slimvec.indexer.progress import progress_bar

    new_dir, journal = _paths(index_dir)
    with open_kept(index_dir, old, store) as kept:
        if kept.dim != old.dim_in:
            raise DimensionMismatchError(f"kept full vectors of {index_dir} ({kept.where})",
                                         old.dim_in, kept.dim, "The index is damaged; "
                                         "re-ingest it.")
        _write_journal(journal, "building", index_dir, spec.recipe, new_dir)
        phase("reading", 0)
        try:
            with progress_bar(progress, "vectors") as bar, IndexBuilder(
                    new_dir, notify=say, checkpoint_seconds=checkpoint_seconds) as b:
                _build(b, kept, old, spec, sample, batch_size, seed, bar, phase, summary,
                       index_dir)
        except IndexBusyError:
            raise  # another rebuild writes it: never clean up under it
        except BaseException:
            if not os.path.lexists(new_dir / MANIFEST):  # nothing committed: leave no trace
                shutil.rmtree(new_dir, ignore_errors=True)
                journal.unlink(missing_ok=True)
            raise


def _refuse_leftovers(new_dir: Path, journal: Path) -> None:
    """A pending journal still here (an old index a reader held open) or a stray build folder
    without a journal: refuse rather than build over it."""
    if os.path.lexists(journal):
        if read_json(journal).get("state") == "building":
            return  # a build to this recipe, resumed
        raise IndexBusyError(
            f"The previous rebuild's old index is still in {new_dir}: a reader had it open when "
            "the swap finished. Close that reader (or restart the server) and rerun; the rerun "
            "removes it first.")
    if os.path.lexists(new_dir):
        raise ConfigError(f"{new_dir} exists but no rebuild journal names it; slimvec does not "
                          "delete what it cannot prove it wrote. Move it away and rerun.")


def refuse_without_kept(index_dir: Path, manifest: Manifest) -> None:
    """Raise :class:`ConfigError` saying how to keep full vectors if the index keeps none."""
    if manifest.full is None:
        open_kept(index_dir, manifest)  # its refusal


def _new_spec(index_dir: Path, old: Manifest, recipe: str) -> IndexSpec:
    """The new index's spec: the recipe's reducer / store / full vectors, the old index's
    encoder, columns and source. Refuses what cannot be rebuilt before anything is written."""
    from slimvec.connectors import make_store
    from slimvec.index.folder import store_folder
    from slimvec.indexer.keepfull import check_recipe
    from slimvec.recipe import merge_recipe, named_keep_full
    from slimvec.reducers import make_reducer

    refuse_without_kept(index_dir, old)
    if not old.completed:
        raise ConfigError(f"{index_dir} has an unfinished write (state "
                          f"{old.progress.state if old.progress else '?'}); finish it by rerunning "
                          "that ingest / migrate, then rebuild.")
    rec = merge_recipe(recipe, keep_full=None)
    if named_keep_full(recipe) is None and old.full is not None:  # keep the index's precision:
        rec = replace(rec, keep_full=old.full.dtype)  # a rebuild never silently grows it
    for where, location in (("the index's", make_store(old.store, store_folder(index_dir)).location),
                            ("the recipe's", make_store(rec.store, Path("store")).location)):
        inside = str(location) in (str(store_folder(index_dir)), "store")
        if not inside:
            raise ConfigError(f"Recipe {rec}: {where} store lives outside the index folder "
                              f"({location}); rebuild swaps index folders and only rebuilds stores "
                              "kept inside them. Give a store spec without a location (e.g. "
                              "qdrant-edge, faiss:HNSW32, hnsw).")
    check_recipe(IndexSpec(store=rec.store, recipe=str(rec)))
    n_out = getattr(make_reducer(rec.reducer), "n_components", None)
    if isinstance(n_out, int) and n_out > old.dim_in:
        raise DimensionMismatchError(f"reducer {rec.reducer} output vs the kept full vectors of "
                                     f"{index_dir}", old.dim_in, n_out,
                                     f"A reducer cannot make more than {old.dim_in} dimensions "
                                     "out of these vectors; choose a smaller one.")
    return replace(IndexSpec.from_manifest(old), reducer=rec.reducer, store=rec.store,
                   keep_full=rec.keep_full, recipe=str(rec))


def _build(b: IndexBuilder, kept: KeptVectors, old: Manifest, spec: IndexSpec, sample: int,
           batch_size: int, seed: int, bar: Any, phase: Callable[[str, int], None],
           summary: RebuildSummary, index_dir: Path) -> None:
    """Fit, then the commit loop over the kept vectors (resumes after the last commit)."""
    total = kept.count()
    fingerprint = {"size": total, "mtime_ns": 0, "head_sha256": old.sha256.get(
        "reducer/config.json", ""), "tail_sha256": str(spec.recipe)}
    plan = b.plan(f"rebuild:{old.reducer}|{old.store}", fingerprint, {"recipe": spec.recipe})

    def fit() -> np.ndarray:
        phase("fitting", 0)
        n = min(int(sample), total)
        bar.add_task(f"fitting {spec.reducer} on {n:,} kept vectors", total=None)
        x = kept.sample(n, seed)
        x = x[np.isfinite(x).all(axis=1)]
        return x[~norm_outliers(x)]

    b.open(spec, old.dim_in, fit)
    if b.summary.created and b.manifest is not None:
        b.manifest.id_rule = old.id_rule  # ids are copied as they are, under the old rule
        _carry_calibration_queries(b, index_dir, old)
    if plan.already_done:
        return
    b.begin(plan)
    summary.fit_seconds = b.summary.fit_seconds
    summary.resumed_from = b.summary.resumed_from
    task = bar.add_task(f"re-reducing into {spec.recipe}", total=total, completed=plan.start_row)
    phase("writing", plan.start_row)

    def batches():
        for ids, full, payloads, next_row in kept.batches(plan.start_row, batch_size):
            yield VectorBatch(ids, full, payloads, [], next_row, source=kept.where)

    def calibrating(row: int) -> None:
        phase("writing" if row < total else "calibrating", row)

    b.run(batches(), lambda n: bar.advance(task, n), calibrating)
    if b.summary.interrupted:
        raise RebuildInterrupted(
            f"rebuild of {old.reducer}|{old.store} into {spec.recipe} interrupted after row "
            f"{b.summary.next_row:,} of {total:,}; the old index is untouched. Rerun the same "
            "command to resume.")


def _carry_calibration_queries(b: IndexBuilder, index_dir: Path, old: Manifest) -> None:
    """Real queries the old index was calibrated on (``slimvec calibrate --queries``) calibrate
    the new ``rescore=auto`` depth too, instead of corpus vectors."""
    from slimvec.index.calibration_queries import CALIBRATION_QUERIES_FILE, load_calibration_queries, save_calibration_queries
    from slimvec.index.manifest import RescoreInfo
    from slimvec.persistence import sha256_file

    if not b.auto_rescore or old.rescore is None or not old.rescore.queries or b.manifest is None:
        return
    queries = load_calibration_queries(index_dir, int(old.dim_in))
    path = save_calibration_queries(b.folder, queries)
    b.manifest.sha256[CALIBRATION_QUERIES_FILE] = sha256_file(path)
    b.manifest.rescore = RescoreInfo(depth=old.rescore.depth, queries=CALIBRATION_QUERIES_FILE)


# ---------------------------------------------------------------------- journal and swap
def _write_journal(journal: Path, state: str, index_dir: Path, recipe: Any, new_dir: Path,
                   new_ino: int | None = None) -> None:
    write_json_atomic(journal, {"format": "slimvec-rebuild", "state": state,
                                "index": index_dir.name, "new": new_dir.name,
                                "recipe": str(recipe), "new_ino": new_ino})


def finish_pending_rebuild(index_dir: str | os.PathLike[str], recipe: str | None = None, *,
                           notify: Callable[[str], None] | None = None
                           ) -> RebuildSummary | None:
    """Finish or roll back a rebuild a crash interrupted (read from its journal).

    A journal past ``swapping`` is finished (the swap completed, the old index removed); a build
    to another recipe than ``recipe`` is discarded (``recipe=None``: any build is discarded), the
    old index is untouched. Returns the summary when the pending rebuild was to ``recipe`` and is
    now complete, else ``None`` (nothing pending, or a build to resume).
    """
    index_dir = Path(index_dir)
    say = notify or log.info
    new_dir, journal = _paths(index_dir)
    if not os.path.lexists(journal):
        return None
    state = read_json(journal)
    if not isinstance(state, dict) or state.get("format") != "slimvec-rebuild":
        raise PersistenceError(f"{journal} is not a slimvec rebuild journal; move it away.")
    same = recipe is not None and _same_recipe(state.get("recipe"), recipe)
    if state.get("state") == "building":
        if same:
            say(f"resuming the interrupted rebuild of {index_dir} to {state['recipe']}")
            return None
        say(f"discarding the unfinished rebuild of {index_dir} to {state.get('recipe')}")
        with IndexLock(new_dir, exclusive=True) if new_dir.is_dir() else _Nothing():
            pass  # refuses (IndexBusyError) while another rebuild still writes it
        shutil.rmtree(new_dir, ignore_errors=True)
        journal.unlink()
        fsync_dir(index_dir.parent)
        return None
    with IndexLock(index_dir, exclusive=False) if index_dir.is_dir() else _Nothing() as lock:
        if state.get("new_ino") is not None and not _swapped(index_dir, int(state["new_ino"])):
            say(f"finishing the interrupted swap of {index_dir} to {state.get('recipe')}")
            if lock is not None:
                _exclusive_for_swap(lock, index_dir, 30.0, None)
            _exchange(index_dir, new_dir)
    removed = _cleanup(index_dir, new_dir, journal, say)
    if not same:
        return None
    m = Manifest.read(index_dir)
    return RebuildSummary(str(index_dir), None, str(m.recipe), documents=int(m.count),
                          bytes_after=allocated_bytes(index_dir), old_removed=removed,
                          rescore_depth=m.rescore.depth if m.rescore else None)


class _Nothing:
    def __enter__(self) -> None:  # noqa: D105 - a context manager that holds nothing
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _same_recipe(a: Any, b: str) -> bool:
    """Whether the journal's recipe ``a`` is what ``b`` asks (``b`` naming no keep_full asks for
    the index's own precision, which ``a`` recorded)."""
    from slimvec.recipe import named_keep_full, resolve_recipe

    try:
        ra, rb = resolve_recipe(str(a)), resolve_recipe(b)
        named = named_keep_full(b)
    except ConfigError:
        return False
    return (ra.reducer, ra.store, ra.rescore) == (rb.reducer, rb.store, rb.rescore) and (
        named is None or ra.keep_full == rb.keep_full)


def _exclusive_for_swap(lock: IndexLock, index_dir: Path, wait: float, n: int | None) -> None:
    """Turn the rebuild's shared lock on the old index into the writer lock before the swap,
    waiting up to ``wait`` seconds for readers that hold it (Qdrant stores: an open shard
    writes to its folder by path when it closes, so none may stay open across the swap)."""
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        try:
            fcntl.flock(lock._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # type: ignore[arg-type]  # held: acquired above
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
    built = f" (the new index is built: {n:,} documents)" if n is not None else ""
    raise IndexBusyError(
        f"{index_dir}: a reader still has the old index open, so it cannot be swapped{built}. "
        "Close that reader (slimvec search, a server) and rerun the same command: the rerun "
        "only swaps.")


def _swapped(index_dir: Path, new_ino: int) -> bool:
    try:
        return os.stat(index_dir).st_ino == new_ino
    except FileNotFoundError:
        return False


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(index_dir: Path, new_dir: Path) -> None:
    """Swap the two folders atomically and make it durable (fsync of the parent)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    done = False
    if fn is not None and index_dir.exists():
        rc = fn(_AT_FDCWD, os.fsencode(str(index_dir)), _AT_FDCWD, os.fsencode(str(new_dir)),
                _RENAME_EXCHANGE)
        err = ctypes.get_errno()
        if rc == 0:
            done = True
        elif err not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise PersistenceError(f"Cannot swap {new_dir} into {index_dir}: "
                                   f"{os.strerror(err)}. Rerun the same command to finish.")
    if not done:  # two renames; a crash between them leaves the index at the aside name,
        aside = index_dir.parent / f".{index_dir.name}.rebuild-old"  # which the rerun finishes
        if index_dir.exists():
            os.rename(index_dir, aside)
            fsync_dir(index_dir.parent)
        os.rename(new_dir, index_dir)
        fsync_dir(index_dir.parent)
        if aside.exists():
            os.rename(aside, new_dir)
    fsync_dir(index_dir.parent)


def _cleanup(index_dir: Path, old_dir: Path, journal: Path, say: Callable[[str], None]) -> bool:
    """Delete the old index (now at ``old_dir``) unless a reader still holds it; then the
    journal. Returns whether it was removed."""
    _write_json_state(journal, "swapped")
    if old_dir.is_dir():
        try:
            lock = IndexLock(old_dir, exclusive=True).acquire()
        except IndexBusyError:
            say(f"the old index stays in {old_dir} while a reader has it open; the next rebuild "
                "of this index removes it")
            return False
        try:
            shutil.rmtree(old_dir)
        finally:
            lock.release()
    journal.unlink(missing_ok=True)
    fsync_dir(index_dir.parent)
    return True


def _write_json_state(journal: Path, state: str) -> None:
    if os.path.lexists(journal):
        data = read_json(journal)
        data["state"] = state
        write_json_atomic(journal, data)
