"""Migrate an existing vector collection into a slimvec index: fit a reducer, stream, commit.

No text and no encoder: the reducer is fitted on a uniform sample of the existing vectors, then
every vector goes through :func:`slimvec.indexer.writer.write_batches` (the commit loop of
``ingest``) with its id and payload. The manifest records ``encoder: null``, so the index is
searched with vectors from the original encoder. With ``keep_full`` the original vectors are also
written to a memory-mapped side file (:class:`~slimvec.connectors.fullvectors.FullVectors`),
committed at the same checkpoints, for ``Index.search(..., rescore=R)``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from slimvec.errors import ConfigError, DimensionMismatchError, PersistenceError, SlimvecError
from slimvec.indexer.checks import norm_outliers
from slimvec.ids import ID_RULE
from slimvec.indexer.keepfull import KeepFullStore, check_keep_full, prepare_full
from slimvec.indexer.index import (
    MANIFEST, REDUCER_DIR, read_manifest, reducer_checksum, store_folder, write_manifest,
)
from slimvec.indexer.locking import IndexLock
from slimvec.indexer.progress import plan_run, truncate_file
from slimvec.indexer.writer import REJECTS, IngestSummary, VectorBatch, write_batches
from slimvec.migrate.sources import SourceBatch, VectorSource, open_source
from slimvec.reducers import load_reducer, make_reducer

__all__ = ["MigrateOptions", "migrate"]

log = logging.getLogger(__name__)


@dataclass
class MigrateOptions:
    """How to migrate (mirrors ``slimvec migrate`` options).

    Parameters
    ----------
    reducer : str or None
        Reducer spec; ``None``: the existing index's, or ``pca:96`` for a new one.
    store : str or None
        Target store spec; ``None``: the existing index's, or ``qdrant-edge``.
    keep_full : str or None
        ``float32`` or ``float16``: also keep the original vectors on disk for rescoring.
    fit_sample : int
        Vectors sampled uniformly from the source to fit the reducer.
    batch_size : int
        Vectors per read / upsert batch.
    checkpoint_seconds, checkpoint_batches : float, int
        Commit at least this often (``checkpoint_batches=0``: by time only) and at the end.
    seed : int
        Seed of the fit sample.
    progress : bool
        Show a progress bar (vectors/s).
    strict : bool
        The first bad vector is fatal instead of going to ``rejects.jsonl``.
    rebuild : bool
        Delete the index in the folder and build it anew.
    """

    reducer: str | None = None
    store: str | None = None
    keep_full: str | None = None
    fit_sample: int = 10_000
    batch_size: int = 1024
    checkpoint_seconds: float = 30.0
    checkpoint_batches: int = 0
    seed: int = 0
    progress: bool = True
    strict: bool = False
    rebuild: bool = False


class _SourceName:
    """The progress record's ``input`` for a source that is not a plain file (a spec string)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def migrate(source: str, index_dir: str | os.PathLike[str], options: MigrateOptions | None = None,
            on_batch: Callable[[int], None] | None = None,
            notify: Callable[[str], None] | None = None) -> IngestSummary:
    """Migrate the vectors (and payloads) of ``source`` into the index folder ``index_dir``.

    Parameters
    ----------
    source : str
        Source spec (see :mod:`slimvec.migrate.sources`): ``qdrant:URL/COLLECTION``,
        ``qdrant-edge:PATH``, ``faiss:FILE``, ``hnsw:FILE,dim=384,space=cosine``, ``FILE.npy``,
        ``parquet:FILE,id=id,vector=vector``.
    index_dir : path
        Index folder, created on first use. Rerunning after an interruption resumes after the last
        commit; rerunning after a completed migration of an unchanged source does nothing.
    options : MigrateOptions
    on_batch : callable, optional
        Called with the next source row after each upserted batch.
    notify : callable, optional
        One-line notices for the user; default: log.

    Returns
    -------
    IngestSummary
        ``rows`` / ``ingested`` / ``rejected`` count vectors; ``interrupted`` after SIGINT/SIGTERM.

    Raises
    ------
    ConfigError
        Bad source spec or options, an index built with other specs, an unfinished migration of
        another or a changed source.
    DimensionMismatchError
        The existing index's reducer takes vectors of another dimension than the source's.
    IndexBusyError
        Another process is writing the index.
    PersistenceError
        The index folder cannot be written.
    """
    opts = options or MigrateOptions()
    check_keep_full(opts.keep_full)
    folder = Path(index_dir)
    say = notify or log.info
    try:
        with IndexLock(folder, exclusive=True):
            with open_source(source) as src:
                return _migrate_locked(src, folder, opts, on_batch, say)
    except SlimvecError:
        raise
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise PersistenceError(
            f"Cannot write the index {folder}: {exc.strerror or exc}{where}. Check that the folder "
            "is writable and the disk is not full, then rerun the same command to resume."
        ) from exc


def _check_same(folder: Path, manifest: dict[str, Any], opts: MigrateOptions, store_spec: str | None,
                src: VectorSource) -> None:
    diffs = []
    if manifest.get("encoder"):
        diffs.append(f"encoder {manifest['encoder']!r} (a migration has none)")
    if opts.reducer is not None and manifest.get("reducer") not in (
            opts.reducer, make_reducer(opts.reducer).spec):
        diffs.append(f"reducer {manifest.get('reducer')!r} (asked {opts.reducer!r})")
    if store_spec is not None and manifest.get("store") != store_spec:
        diffs.append(f"store {manifest.get('store')!r} (asked {opts.store!r})")
    had_full = (manifest.get("full") or {}).get("dtype")
    if opts.keep_full is not None and had_full != opts.keep_full:
        diffs.append(f"full vectors {had_full!r} (asked --keep-full {opts.keep_full!r})")
    if diffs:
        raise ConfigError(
            f"{folder} already holds an index built with {', '.join(diffs)}. Use the same options "
            "to add to it, another --index folder, or --rebuild to delete it and build anew."
        )
    if int(manifest["dim_in"]) != src.dim:
        raise DimensionMismatchError(f"reducer input of {folder} vs vectors of {src.spec}",
                                     manifest["dim_in"], src.dim,
                                     "Migrate into another --index folder or pass --rebuild.")


def _migrate_locked(src: VectorSource, folder: Path, opts: MigrateOptions,
                    on_batch: Callable[[int], None] | None,
                    say: Callable[[str], None]) -> IngestSummary:
    from slimvec.connectors import canonical_store_spec, make_store
    from slimvec.indexer.index import check_store_dim, verify_index_files
    from slimvec.indexer.pipeline import (
        DEFAULT_REDUCER, DEFAULT_STORE, _prepare_folder, _progress, _record_store_checksums,
    )

    if src.dim <= 0 or src.count() == 0:
        raise ConfigError(f"{src.spec} holds no vectors: nothing to migrate.")
    _prepare_folder(folder, opts.rebuild)
    existing = (folder / MANIFEST).exists()
    manifest: dict[str, Any] = {}
    if existing:
        manifest = read_manifest(folder)
        _check_same(folder, manifest, opts,
                    canonical_store_spec(opts.store) if opts.store else None, src)
        opts = replace(opts, reducer=manifest["reducer"], store=manifest["store"],
                       keep_full=(manifest.get("full") or {}).get("dtype"))
    else:
        opts = replace(opts, reducer=opts.reducer or DEFAULT_REDUCER, store=opts.store or DEFAULT_STORE)
    make_reducer(opts.reducer)  # fail fast on bad specs before reading the source
    canonical_store_spec(opts.store)
    is_file = hasattr(src, "path") and Path(getattr(src, "path")).is_file()
    input_name: Any = Path(getattr(src, "path")).resolve() if is_file else _SourceName(src.spec)
    fp = src.fingerprint()
    columns = {"source": src.spec}
    plan = plan_run(folder, manifest.get("progress"), input_name, fp, columns)
    summary = IngestSummary(index=str(folder), input=src.spec)
    if plan.already_done:
        summary.already_done = True
        summary.count = int(manifest.get("count", 0))
        summary.next_row = int(manifest["progress"].get("next_row", 0))
        say(f"{src.spec} was already migrated completely into {folder} ({summary.next_row:,} "
            "vectors); nothing to do. Pass --rebuild to build the index anew.")
        return summary
    total = src.count()
    with _progress(opts.progress, None, "migrate", unit="vectors") as progress:
        t_start = time.perf_counter()
        if existing:
            verify_index_files(folder, manifest)
            reducer = load_reducer(folder / REDUCER_DIR)
            store = make_store(manifest["store"], store_folder(folder)).open()
            check_store_dim(folder, store, reducer)
            full = prepare_full(folder, manifest, store, opts.keep_full, src.dim, new=False)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            n_fit = min(opts.fit_sample, total)
            task = progress.add_task(f"sampling and fitting {opts.reducer} on {n_fit:,} vectors", total=1)
            t0 = time.perf_counter()
            sample = src.sample(n_fit, opts.seed)
            sample = sample[np.isfinite(sample).all(axis=1)]  # bad rows become rejects later
            sample = sample[~norm_outliers(sample)]  # so do rows with an absurd norm (1e10)
            if not len(sample):
                raise ConfigError(f"{src.spec}: no finite vector in a sample of {n_fit:,}; nothing "
                                  "to fit the reducer on. Check the source's vectors.")
            reducer = make_reducer(opts.reducer).fit(sample)
            summary.fit_seconds = time.perf_counter() - t0
            progress.advance(task)
            reducer.save(folder / REDUCER_DIR)
            store = make_store(opts.store, store_folder(folder))
            manifest = {
                "encoder": None, "encoder_name": None, "dim_in": src.dim,
                "reducer": reducer.spec, "dim_out": reducer.n_components_,
                "store": canonical_store_spec(opts.store), "metric": "cosine", "count": 0,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "source": src.spec, "text_column": None, "id_column": None, "id_rule": ID_RULE,
                "sha256": {f"{REDUCER_DIR}/config.json": reducer_checksum(folder)},
            }
            full = prepare_full(folder, manifest, store, opts.keep_full, src.dim, new=True)
            store.create(reducer.n_components_, "cosine")
            summary.created = True
        if plan.resuming:
            truncate_file(folder / REJECTS, plan.rejects_bytes)
            summary.resumed_from = plan.start_row
            say(f"resuming at vector {plan.start_row:,} of {src.spec} (vectors before it are "
                f"committed in {folder})")
        rejects_path = folder / REJECTS
        manifest["progress"] = {
            "input": str(input_name), "fingerprint": fp, "columns": columns,
            "next_row": plan.start_row, "state": "running",
            "rejects_bytes": rejects_path.stat().st_size if rejects_path.exists() else 0,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        manifest.pop("store_sha256", None)
        write_manifest(folder, manifest)

        target = KeepFullStore(store, full, src.dim, src.spec) if opts.keep_full else store

        src.id_rule = int(manifest.get("id_rule", 1))  # an existing index keeps its id rule

        def batches() -> Iterator[VectorBatch]:
            for b in src.batches(plan.start_row, opts.batch_size):
                if opts.keep_full:
                    target.stage(b.ids, b.vectors)
                yield _vector_batch(b, src.spec)

        task = progress.add_task(f"migrating {src.spec}", total=total, completed=plan.start_row)
        t_stream = time.perf_counter()
        write_batches(folder, manifest, target, reducer, batches(), summary,
                      lambda n: progress.advance(task, n), opts.checkpoint_seconds, on_batch,
                      checkpoint_batches=opts.checkpoint_batches, strict=opts.strict)
        if not summary.interrupted:
            _record_store_checksums(folder, manifest)
    summary.seconds = time.perf_counter() - t_stream
    summary.total_seconds = time.perf_counter() - t_start
    log.info("migrated %d vectors (%d rejected) from %s into %s in %.1fs", summary.ingested,
             summary.rejected, src.spec, folder, summary.total_seconds)
    return summary


def _vector_batch(b: SourceBatch, spec: str) -> VectorBatch:
    lo = b.next_row - len(b.ids)
    return VectorBatch(b.ids, b.vectors, b.payloads, list(b.rejects), b.next_row,
                       rows=b.rows or list(range(lo, b.next_row)), lines=[None] * len(b.ids), source=spec)
