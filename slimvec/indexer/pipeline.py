"""Source -> encoder -> fitted reducer -> store, with a progress bar and checkpoints.

:func:`ingest` creates an index folder on first use (fitting the reducer on a reservoir sample of
the input) and adds to it on later runs. Store ids are derived from document ids
(:func:`slimvec.ids.doc_id`), so ingesting the same input again overwrites instead of duplicating.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from slimvec.errors import ConfigError, DimensionMismatchError
from slimvec.ids import doc_ids
from slimvec.indexer.index import (
    MANIFEST, REDUCER_DIR, read_manifest, store_folder, write_manifest,
)
from slimvec.indexer.encoder import DEFAULT_ENCODER
from slimvec.indexer.sources import Document, Reject, SourceSpec, iter_batches, iter_records
from slimvec.reducers import Reducer, load_reducer, make_reducer

__all__ = ["IngestOptions", "IngestSummary", "ingest", "reservoir_sample", "REJECTS",
           "VectorBatch", "write_batches"]

log = logging.getLogger(__name__)
REJECTS = "rejects.jsonl"
DEFAULT_REDUCER = "pca:96"
DEFAULT_STORE = "qdrant-edge"


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
    text_column, id_column, format : see :class:`~slimvec.indexer.sources.SourceSpec`.
    fit_sample : int
        Reservoir sample size the reducer is fitted on.
    batch_size : int
        Documents per encode / upsert batch.
    checkpoint_seconds : float
        Make the store durable and record progress at most this often (and at the end).
    seed : int
        Seed of the reservoir sample.
    """

    reducer: str | None = None
    store: str | None = None
    encoder: str | None = None
    text_column: str = "text"
    id_column: str | None = None
    format: str | None = None
    fit_sample: int = 10_000
    batch_size: int = 256
    checkpoint_seconds: float = 30.0
    seed: int = 0
    progress: bool = True


@dataclass
class IngestSummary:
    """What one ingest run did."""

    index: str
    rows: int = 0
    ingested: int = 0
    rejected: int = 0
    count: int = 0
    seconds: float = 0.0
    total_seconds: float = 0.0
    encode_seconds: float = 0.0
    fit_seconds: float = 0.0
    created: bool = False
    reject_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def docs_per_s(self) -> float:
        """Ingested documents per second of the whole run (sampling, fit, streaming, indexing)."""
        return self.ingested / self.total_seconds if self.total_seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        out = asdict(self)
        out["docs_per_s"] = round(self.docs_per_s, 1)
        return out


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


def _progress(enabled: bool, total: int | None, description: str):
    from rich.progress import (
        BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
    )

    class _Rate(TextColumn):
        def __init__(self) -> None:
            super().__init__("")

        def render(self, task):  # type: ignore[override]
            from rich.text import Text

            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} docs/s" if speed else "")

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    _Rate(), TimeElapsedColumn(), TimeRemainingColumn(), disable=not enabled,
                    transient=False)


class _Checkpointer:
    """Flushes the store and records progress in the manifest at most every N seconds."""

    def __init__(self, folder: Path, manifest: dict[str, Any], store: Any, every_s: float) -> None:
        self.folder, self.manifest, self.store, self.every_s = folder, manifest, store, every_s
        self.last = time.monotonic()

    def maybe(self, next_row: int, force: bool = False) -> None:
        if not force and time.monotonic() - self.last < self.every_s:
            return
        self.store.flush()
        self.manifest["count"] = int(self.store.count())
        self.manifest["progress"]["next_row"] = int(next_row)
        write_manifest(self.folder, self.manifest)
        self.last = time.monotonic()


def _fit_new_index(folder: Path, source: SourceSpec, opts: IngestOptions, encoder: Any,
                   progress: Any) -> tuple[Reducer, dict[int, np.ndarray], int, float]:
    """Sample, encode and fit; returns the reducer, sampled row -> vector, row count, fit seconds."""
    task = progress.add_task("sampling input", total=None)
    sample, rows = reservoir_sample(iter_records(source), opts.fit_sample, opts.seed)
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
    reducer.fit(X)
    progress.advance(fit_task)
    fit_s = time.perf_counter() - t0
    reducer.save(folder / REDUCER_DIR)
    return reducer, {d.row: X[i] for i, d in enumerate(sample)}, rows, fit_s


def ingest(input_path: str | os.PathLike[str], index_dir: str | os.PathLike[str],
           options: IngestOptions | None = None,
           on_batch: Callable[[int], None] | None = None) -> IngestSummary:
    """Ingest a document file into an index folder (created on first use).

    Parameters
    ----------
    input_path : path
        JSONL, CSV, TSV, Parquet or text file.
    index_dir : path
        Index folder. When it already holds an index, its reducer and store are reused and
        ``options.reducer`` / ``options.store`` / ``options.encoder`` must match it.
    options : IngestOptions
    on_batch : callable, optional
        Called with the next row number after each committed batch (used by tests and tools).

    Returns
    -------
    IngestSummary

    Raises
    ------
    ConfigError
        Bad input file or options; an existing index built with other specs.
    """
    from slimvec.connectors import canonical_store_spec, make_store
    from slimvec.indexer.encoder import Encoder

    opts = options or IngestOptions()
    folder = Path(index_dir)
    if (folder / MANIFEST).exists():
        manifest = read_manifest(folder)
        _check_same_specs(folder, manifest, opts, canonical_store_spec(opts.store) if opts.store else None)
        opts = replace(opts, reducer=manifest["reducer"], store=manifest["store"],
                       encoder=manifest["encoder"])
    else:
        opts = replace(opts, reducer=opts.reducer or DEFAULT_REDUCER, store=opts.store or DEFAULT_STORE,
                       encoder=opts.encoder or DEFAULT_ENCODER)
    source = SourceSpec(str(input_path), opts.text_column, opts.id_column, opts.format)
    iter_records(source)  # fail fast on a missing file / unknown format
    make_reducer(opts.reducer)  # fail fast on a bad reducer spec, before sampling and encoding
    canonical_store_spec(opts.store)
    summary = IngestSummary(index=str(folder))
    existing = (folder / MANIFEST).exists()
    t_start = time.perf_counter()
    with _progress(opts.progress, None, "ingest") as progress:
        encoder = Encoder(opts.encoder, batch_size=min(opts.batch_size, 128))
        t_start = time.perf_counter()  # model loading is a constant, not throughput
        sample_vectors: dict[int, np.ndarray] = {}
        total_rows: int | None = None
        if existing:
            reducer = load_reducer(folder / REDUCER_DIR)
            if reducer.n_features_in_ != encoder.dim:
                raise DimensionMismatchError(f"encoder {opts.encoder} vs reducer of {folder}",
                                             reducer.n_features_in_, encoder.dim)
            store = make_store(manifest["store"], store_folder(folder)).open()
        else:
            folder.mkdir(parents=True, exist_ok=True)
            reducer, sample_vectors, total_rows, summary.fit_seconds = _fit_new_index(
                folder, source, opts, encoder, progress)
            store = make_store(opts.store, store_folder(folder)).create(reducer.n_components_, "cosine")
            manifest = {
                "encoder": opts.encoder, "encoder_name": encoder.name, "dim_in": encoder.dim,
                "reducer": reducer.spec, "dim_out": reducer.n_components_,
                "store": canonical_store_spec(opts.store), "metric": "cosine", "count": 0,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "text_column": opts.text_column, "id_column": opts.id_column,
            }
            summary.created = True
        manifest["progress"] = {"input": str(Path(input_path).resolve()), "next_row": 0}
        write_manifest(folder, manifest)

        def batches() -> Iterator[VectorBatch]:
            for docs, rejects, next_row in iter_batches(source, opts.batch_size):
                t0 = time.perf_counter()
                vecs = _encode_batch(encoder, docs, sample_vectors)
                summary.encode_seconds += time.perf_counter() - t0
                yield VectorBatch(doc_ids([d.id for d in docs]), vecs, [_payload(d) for d in docs],
                                  rejects, next_row)

        task = progress.add_task(f"ingesting {Path(input_path).name}", total=total_rows)
        t_stream = time.perf_counter()
        write_batches(folder, manifest, store, reducer, batches(), summary,
                      lambda n: progress.advance(task, n), opts.checkpoint_seconds, on_batch)
    summary.seconds = time.perf_counter() - t_stream
    summary.total_seconds = time.perf_counter() - t_start
    log.info("ingested %d documents (%d rejected) into %s in %.1fs", summary.ingested,
             summary.rejected, folder, time.perf_counter() - t_start)
    return summary


@dataclass
class VectorBatch:
    """One batch on its way to the store: full-dimension vectors before reduction.

    Attributes
    ----------
    ids : ndarray of int64
        Store ids (:func:`slimvec.ids.doc_id` of the source ids).
    vectors : ndarray of float32, shape (n, dim_in)
    payloads : list of dict
    rejects : list of Reject
        Rows of this batch that could not be ingested.
    next_row : int
        Source row to resume from once this batch is committed.
    """

    ids: np.ndarray
    vectors: np.ndarray
    payloads: list[dict[str, Any]]
    rejects: list[Reject]
    next_row: int


def write_batches(folder: Path, manifest: dict[str, Any], store: Any, reducer: Reducer,
                  batches: Iterator[VectorBatch], summary: IngestSummary,
                  advance: Callable[[int], None], checkpoint_seconds: float,
                  on_batch: Callable[[int], None] | None = None) -> None:
    """Reduce and upsert a stream of batches, record rejects, checkpoint, finalize, close.

    The shared machinery of ``ingest`` (documents -> encoder) and ``migrate`` (existing vectors).
    Progress (``manifest['progress']['next_row']``) advances only after the store flushed.
    """
    checkpoint = _Checkpointer(folder, manifest, store, checkpoint_seconds)
    next_row = int(manifest["progress"].get("next_row", 0))
    try:
        with open(folder / REJECTS, "a", encoding="utf-8") as rejects_fh:
            for batch in batches:
                for rej in batch.rejects:
                    rejects_fh.write(json.dumps(rej.to_json(), ensure_ascii=False) + "\n")
                    summary.reject_reasons[rej.reason] = summary.reject_reasons.get(rej.reason, 0) + 1
                summary.rejected += len(batch.rejects)
                if len(batch.ids):
                    store.upsert(batch.ids, reducer.transform(batch.vectors), batch.payloads)
                    summary.ingested += len(batch.ids)
                n = len(batch.ids) + len(batch.rejects)
                summary.rows += n
                advance(n)
                rejects_fh.flush()
                next_row = batch.next_row
                checkpoint.maybe(next_row)
                if on_batch is not None:
                    on_batch(batch.next_row)
        store.finalize()
        checkpoint.maybe(next_row, force=True)
    finally:
        summary.count = int(store.count())
        store.close()


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
            "to add to it, or another --index folder."
        )
