"""Source -> encoder -> fitted reducer -> store, with a progress bar and resumable checkpoints.

:func:`ingest` creates an index folder on first use (fitting the reducer on a reservoir sample of
the input) and adds to it on later runs. Store ids are derived from document ids
(:func:`slimvec.ids.doc_id`), so ingesting the same input again overwrites instead of duplicating.

A run holds the index's writer lock (:mod:`slimvec.indexer.locking`), commits through
:func:`~slimvec.indexer.writer.write_batches`, and keeps a durable progress record
(:mod:`slimvec.indexer.progress`): rerunning an interrupted or killed ingest resumes after the last
commit; a changed input file, reducer or store under an unfinished index is refused unless
``rebuild``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from slimvec.errors import ConfigError, DimensionMismatchError, PersistenceError, SlimvecError
from slimvec.ids import ID_RULE, doc_ids
from slimvec.indexer.checks import STATE_DB, DuplicateTracker, truncation_rejects
from slimvec.indexer.encoder import DEFAULT_ENCODER
from slimvec.indexer.index import (
    MANIFEST, REDUCER_DIR, STORE_DIR, read_manifest, reducer_checksum, store_folder,
    write_manifest,
)
from slimvec.indexer.keepfull import KeepFullStore, check_keep_full, prepare_full
from slimvec.indexer.locking import LOCK_NAME, IndexLock
from slimvec.indexer.progress import fingerprint, plan_run, truncate_file
from slimvec.indexer.sources import Document, Reject, SourceSpec, iter_batches, iter_records
from slimvec.indexer.writer import REJECTS, IngestSummary, VectorBatch, write_batches
from slimvec.indexer.train_pairs import fit_reducer
from slimvec.reducers import Reducer, load_reducer, make_reducer

__all__ = ["IngestOptions", "IngestSummary", "ingest", "reservoir_sample", "REJECTS",
           "VectorBatch", "write_batches"]

log = logging.getLogger(__name__)
DEFAULT_REDUCER = "pca:96"
DEFAULT_STORE = "qdrant-edge"
#: what an index folder may hold; a folder with anything else is not ours to clean
_OWN_NAMES = {MANIFEST, REDUCER_DIR, STORE_DIR, REJECTS, LOCK_NAME, STATE_DB, STATE_DB + "-wal",
              STATE_DB + "-shm", "full"}


@dataclass
class IngestOptions:
    """What to ingest and how (mirrors ``slimvec ingest`` options).

    Parameters
    ----------
    reducer : str or None
        Reducer spec; ``None`` means the existing index's, or ``pca:96`` for a new index.
    store : str or None
        Store spec; ``None`` means the existing index's, or ``qdrant-edge`` for a new index.
    encoder : str or None
        Encoder spec or model folder; ``None`` means the existing index's, or ``minilm``.
    text_column, id_column, format, quoting : see :class:`~slimvec.indexer.sources.SourceSpec`.
    fit_sample : int
        Reservoir sample size the reducer is fitted on.
    batch_size : int
        Documents per encode / upsert batch.
    checkpoint_seconds : float
        Make the store durable and record progress at least this often (and at the end).
    seed : int
        Seed of the reservoir sample.
    progress : bool
        Show a progress bar.
    strict : bool
        The first bad row is fatal (:class:`ConfigError`) instead of going to ``rejects.jsonl``.
    rebuild : bool
        Delete the existing index in the folder and build it anew (needed to change the reducer,
        store or encoder, or to drop an unfinished ingest of a file that changed).
    checkpoint_batches : int
        Also commit every this many batches (0: by time only).
    keep_full : str or None
        ``float32`` / ``float16``: also keep the encoder's full vectors on disk for
        ``Index.search(..., rescore=R)`` (new index only; an existing index keeps its setting).
    train_pairs : str or None
        Pairs TSV (``sentence1, sentence2, score``) whose positive pairs a pair-learning reducer
        (mcr2) is also fitted on (new index only); see :mod:`slimvec.indexer.train_pairs`.
    """

    reducer: str | None = None
    store: str | None = None
    encoder: str | None = None
    text_column: str = "text"
    id_column: str | None = None
    format: str | None = None
    quoting: str | None = None
    fit_sample: int = 10_000
    batch_size: int = 256
    checkpoint_seconds: float = 30.0
    seed: int = 0
    progress: bool = True
    strict: bool = False
    rebuild: bool = False
    checkpoint_batches: int = 0
    keep_full: str | None = None
    train_pairs: str | None = None


def reservoir_sample(records: Iterator[Document | Reject], n: int, seed: int = 0
                     ) -> tuple[list[Document], int]:
    """Uniform sample of up to ``n`` documents in one pass (Algorithm R); also counts rows."""
    rng = random.Random(seed)
    sample: list[Document] = []
    seen = 0
    rows = 0
    for rec in records:
        rows += 1
        if not isinstance(rec, Document):
            continue
        seen += 1
        if len(sample) < n:
            sample.append(rec)
        else:
            j = rng.randrange(seen)
            if j < n:
                sample[j] = rec
    return sample, rows


def _payload(doc: Document) -> dict[str, Any]:
    payload = {k: v for k, v in doc.payload.items() if _jsonable(v)}
    payload["text"] = doc.text
    payload["source_id"] = doc.id
    return payload


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _progress(enabled: bool, total: int | None, description: str, unit: str = "docs"):
    from rich.progress import (
        BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
    )

    class _Rate(TextColumn):
        def __init__(self) -> None:
            super().__init__("")

        def render(self, task):  # type: ignore[override]
            from rich.text import Text

            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} {unit}/s" if speed else "")

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    _Rate(), TimeElapsedColumn(), TimeRemainingColumn(), disable=not enabled,
                    transient=False)


def _strict_records(records: Iterator[Document | Reject]) -> Iterator[Document | Reject]:
    from slimvec.indexer.writer import _strict_error

    for rec in records:
        if isinstance(rec, Reject) and not rec.kept:
            raise _strict_error(rec)
        yield rec


def _fit_new_index(folder: Path, source: SourceSpec, opts: IngestOptions, encoder: Any,
                   progress: Any) -> tuple[Reducer, dict[int, np.ndarray], int, float]:
    """Sample, encode and fit; returns the reducer, sampled row -> vector, row count, fit seconds."""
    task = progress.add_task("sampling input", total=None)
    records = iter_records(source)
    if opts.strict:
        records = _strict_records(records)
    sample, rows = reservoir_sample(records, opts.fit_sample, opts.seed)
    progress.update(task, total=rows, completed=rows)
    if not sample:
        raise ConfigError(f"{source.path} holds no ingestible document: nothing to fit the reducer on "
                          f"(see {folder / REJECTS}).")
    sample.sort(key=lambda d: d.row)
    enc_task = progress.add_task(f"encoding fit sample ({len(sample):,})", total=len(sample))
    vectors = []
    for i in range(0, len(sample), opts.batch_size):
        chunk = sample[i:i + opts.batch_size]
        vectors.append(encoder.encode([d.text for d in chunk]))
        progress.advance(enc_task, len(chunk))
    X = np.concatenate(vectors)
    reducer = make_reducer(opts.reducer)
    t0 = time.perf_counter()
    fit_task = progress.add_task(f"fitting {opts.reducer} on {len(X):,} vectors", total=1)
    fit_reducer(reducer, X, opts.train_pairs, encoder, opts.batch_size)
    progress.advance(fit_task)
    fit_s = time.perf_counter() - t0
    reducer.save(folder / REDUCER_DIR)
    return reducer, {d.row: X[i] for i, d in enumerate(sample)}, rows, fit_s


_IO_HINTS = ("No space left", "Read-only file system", "Permission denied", "Disk quota",
             "File too large", "disk I/O error", "database or disk is full",
             "attempt to write a readonly database")  # the last three: SQLite (payloads, state)


def ingest(input_path: str | os.PathLike[str], index_dir: str | os.PathLike[str],
           options: IngestOptions | None = None,
           on_batch: Callable[[int], None] | None = None,
           notify: Callable[[str], None] | None = None) -> IngestSummary:
    """Ingest a document file into an index folder (created on first use), resumably.

    Parameters
    ----------
    input_path : path
        JSONL, CSV, TSV, Parquet or text file.
    index_dir : path
        Index folder. When it already holds an index, its reducer and store are reused and
        ``options.reducer`` / ``options.store`` / ``options.encoder`` must match it (or
        ``options.rebuild``). An unfinished ingest of the same unchanged file is resumed after
        its last commit; the same file ingested completely before is not read again.
    options : IngestOptions
    on_batch : callable, optional
        Called with the next row number after each upserted batch (used by tests and tools).
    notify : callable, optional
        Receives one-line notices for the user ("resuming at row N of FILE"); default: log.

    Returns
    -------
    IngestSummary
        ``interrupted`` is true when a SIGINT / SIGTERM stopped the run at a batch boundary
        (everything before ``next_row`` is committed; rerun to resume).

    Raises
    ------
    ConfigError
        Bad input file or options; an existing index built with other specs; an unfinished
        ingest of another or a changed file; a bad row under ``strict``.
    IndexBusyError
        Another process is writing the index.
    PersistenceError
        The index folder cannot be written (read-only, full) or its files fail their checks.
    """
    opts = options or IngestOptions()
    folder = Path(index_dir)
    say = notify or log.info
    try:
        with IndexLock(folder, exclusive=True):
            return _ingest_locked(Path(input_path), folder, opts, on_batch, say)
    except SlimvecError:
        raise
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise PersistenceError(
            f"Cannot write the index {folder}: {exc.strerror or exc}{where}. Check that the folder "
            "is writable and the disk is not full, then rerun the same command to resume."
        ) from exc
    except Exception as exc:  # store engines report I/O failures as their own exceptions
        if any(h in str(exc) for h in _IO_HINTS):
            raise PersistenceError(
                f"The store of {folder} could not write: {str(exc).splitlines()[0][:300]}. Check "
                "that the folder is writable and the disk is not full, then rerun the same "
                "command to resume."
            ) from exc
        raise


def _prepare_folder(folder: Path, rebuild: bool) -> None:
    """Wipe the index for ``rebuild``; clean what a crash before the first commit left."""
    manifest_exists = (folder / MANIFEST).exists()
    if manifest_exists and not rebuild:
        return
    entries = [p for p in folder.iterdir() if p.name != LOCK_NAME] if folder.is_dir() else []
    strangers = [p.name for p in entries if p.name not in _OWN_NAMES and not p.name.startswith(".")]
    if strangers:
        raise ConfigError(
            f"{folder} is not empty and is not a slimvec index (it holds {', '.join(strangers[:5])}"
            f"{'...' if len(strangers) > 5 else ''}). Choose an empty or new --index folder."
        )
    if manifest_exists:
        (folder / MANIFEST).unlink()  # first, so a crash mid-wipe leaves no half index
    for p in entries:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()


def _ingest_locked(input_path: Path, folder: Path, opts: IngestOptions,
                   on_batch: Callable[[int], None] | None,
                   say: Callable[[str], None]) -> IngestSummary:
    from slimvec.connectors import canonical_store_spec, make_store
    from slimvec.indexer.encoder import Encoder
    from slimvec.indexer.index import check_store_dim, verify_index_files

    _prepare_folder(folder, opts.rebuild)
    existing = (folder / MANIFEST).exists()
    manifest: dict[str, Any] = {}
    if existing:
        manifest = read_manifest(folder)
        _check_same_specs(folder, manifest, opts,
                          canonical_store_spec(opts.store) if opts.store else None)
        opts = replace(opts, reducer=manifest["reducer"], store=manifest["store"],
                       encoder=manifest["encoder"])
    else:
        opts = replace(opts, reducer=opts.reducer or DEFAULT_REDUCER,
                       store=opts.store or DEFAULT_STORE, encoder=opts.encoder or DEFAULT_ENCODER)
    source = SourceSpec(str(input_path), opts.text_column, opts.id_column, opts.format, opts.quoting)
    iter_records(source)  # fail fast on a missing file / unknown format
    resolved = input_path.resolve()
    fp = fingerprint(resolved)
    columns = {"text_column": opts.text_column, "id_column": opts.id_column, "format": opts.format}
    plan = plan_run(folder, manifest.get("progress"), resolved, fp, columns)
    summary = IngestSummary(index=str(folder), input=str(input_path))
    if plan.already_done:
        summary.already_done = True
        summary.count = int(manifest.get("count", 0))
        summary.next_row = int(manifest["progress"].get("next_row", 0))
        say(f"{input_path} was already ingested completely into {folder} "
            f"({summary.next_row:,} rows); nothing to do. Pass --rebuild to build the index anew.")
        return summary
    make_reducer(opts.reducer)  # fail fast on a bad reducer spec, before sampling and encoding
    canonical_store_spec(opts.store)
    check_keep_full(opts.keep_full)
    with _progress(opts.progress, None, "ingest") as progress:
        encoder = Encoder(opts.encoder, batch_size=min(opts.batch_size, 128))
        t_start = time.perf_counter()  # model loading is a constant, not throughput
        sample_vectors: dict[int, np.ndarray] = {}
        total_rows: int | None = None
        if existing:
            verify_index_files(folder, manifest)
            reducer = load_reducer(folder / REDUCER_DIR)
            if reducer.n_features_in_ != encoder.dim:
                raise DimensionMismatchError(
                    f"reducer input of {folder} vs encoder {opts.encoder} output",
                    reducer.n_features_in_, encoder.dim,
                    "The index was built with another encoder; pass the same --encoder or --rebuild.")
            store = make_store(manifest["store"], store_folder(folder)).open()
            check_store_dim(folder, store, reducer)
            full = prepare_full(folder, manifest, store, (manifest.get("full") or {}).get("dtype"),
                                encoder.dim, new=False)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            reducer, sample_vectors, total_rows, summary.fit_seconds = _fit_new_index(
                folder, source, opts, encoder, progress)
            store = make_store(opts.store, store_folder(folder))
            manifest = {
                "encoder": opts.encoder, "encoder_name": encoder.name, "dim_in": encoder.dim,
                "reducer": reducer.spec, "dim_out": reducer.n_components_,
                "store": canonical_store_spec(opts.store), "metric": "cosine", "count": 0,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "text_column": opts.text_column, "id_column": opts.id_column, "id_rule": ID_RULE,
                "sha256": {f"{REDUCER_DIR}/config.json": reducer_checksum(folder)},
            }
            full = prepare_full(folder, manifest, store, opts.keep_full, encoder.dim, new=True)
            store.create(reducer.n_components_, "cosine")
            summary.created = True
        if plan.resuming:
            truncate_file(folder / REJECTS, plan.rejects_bytes)
            summary.resumed_from = plan.start_row
            say(f"resuming at row {plan.start_row:,} of {input_path} (rows before it are committed "
                f"in {folder})")
        rejects_path = folder / REJECTS
        manifest["progress"] = {
            "input": str(resolved), "fingerprint": fp, "columns": columns,
            "next_row": plan.start_row, "state": "running",
            "rejects_bytes": rejects_path.stat().st_size if rejects_path.exists() else 0,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        manifest.pop("store_sha256", None)  # store files are about to change
        write_manifest(folder, manifest)
        tracker = DuplicateTracker(folder / STATE_DB, fresh=not plan.resuming)
        id_field = opts.id_column or "id"
        target = (KeepFullStore(store, full, encoder.dim, source.path)
                  if manifest.get("full") else store)

        def batches() -> Iterator[VectorBatch]:
            for docs, rejects, next_row in iter_batches(source, opts.batch_size, plan.start_row):
                ids = doc_ids([d.id for d in docs], int(manifest.get("id_rule", 1)))
                warnings = tracker.check(ids, docs, source.path, id_field)
                warnings += truncation_rejects(encoder, docs, source.path, opts.text_column)
                t0 = time.perf_counter()
                vecs = _encode_batch(encoder, docs, sample_vectors)
                summary.encode_seconds += time.perf_counter() - t0
                if target is not store:
                    target.stage(ids, vecs)
                yield VectorBatch(ids, vecs, [_payload(d) for d in docs], rejects + warnings,
                                  next_row, rows=[d.row for d in docs],
                                  lines=[d.line for d in docs], source=source.path)

        task = progress.add_task(f"ingesting {input_path.name}", total=total_rows,
                                 completed=plan.start_row if total_rows else 0)
        t_stream = time.perf_counter()
        finished = False
        try:
            write_batches(folder, manifest, target, reducer, batches(), summary,
                          lambda n: progress.advance(task, n), opts.checkpoint_seconds, on_batch,
                          checkpoint_batches=opts.checkpoint_batches, strict=opts.strict,
                          on_commit=tracker.commit)
            finished = not summary.interrupted
        finally:
            tracker.close(delete=finished)
        if finished:
            _record_store_checksums(folder, manifest)
    summary.seconds = time.perf_counter() - t_stream
    summary.total_seconds = time.perf_counter() - t_start
    if summary.duplicates:
        log.warning("%d row(s) reused an earlier id with different text; the last one won "
                    "(listed in %s)", summary.duplicates, folder / REJECTS)
    log.info("ingested %d documents (%d rejected) into %s in %.1fs", summary.ingested,
             summary.rejected, folder, summary.total_seconds)
    return summary


def _record_store_checksums(folder: Path, manifest: dict[str, Any]) -> None:
    """After a completed run, record SHA-256 of snapshot-style store files (FAISS, hnswlib)."""
    from slimvec.indexer.index import store_checksums

    sums = store_checksums(folder, manifest)
    if sums:
        manifest["store_sha256"] = sums
        write_manifest(folder, manifest)


def _encode_batch(encoder: Any, docs: list[Document], cached: dict[int, np.ndarray]) -> np.ndarray:
    """Encode a batch, reusing vectors already computed for the fit sample."""
    out = np.empty((len(docs), encoder.dim), dtype=np.float32)
    if not docs:
        return out
    todo = [i for i, d in enumerate(docs) if d.row not in cached]
    for i, d in enumerate(docs):
        if d.row in cached:
            out[i] = cached.pop(d.row)
    if todo:
        out[todo] = encoder.encode([docs[i].text for i in todo])
    return out


def _check_same_specs(folder: Path, manifest: dict[str, Any], opts: IngestOptions,
                      store_spec: str | None) -> None:
    diffs = []
    if opts.reducer is not None and manifest.get("reducer") not in (
            opts.reducer, make_reducer(opts.reducer).spec):
        diffs.append(f"reducer {manifest.get('reducer')!r} (asked {opts.reducer!r})")
    if store_spec is not None and manifest.get("store") != store_spec:
        diffs.append(f"store {manifest.get('store')!r} (asked {opts.store!r})")
    if opts.encoder is not None and manifest.get("encoder") != opts.encoder:
        diffs.append(f"encoder {manifest.get('encoder')!r} (asked {opts.encoder!r})")
    if diffs:
        raise ConfigError(
            f"{folder} already holds an index built with {', '.join(diffs)}. Use the same specs "
            "to add to it, another --index folder, or --rebuild to delete it and build anew."
        )
