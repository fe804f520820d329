"""Source -> encoder -> fitted reducer -> store, with a progress bar and resumable checkpoints.

:func:`ingest` creates an index folder on first use (fitting the reducer on a reservoir sample of
the input) and adds to it on later runs. Store ids are derived from document ids
(:func:`slimvec.ids.doc_id`), so ingesting the same input again overwrites instead of duplicating.

This module is a producer: it turns documents into :class:`VectorBatch` es and a fit sample;
:class:`~slimvec.indexer.builder.IndexBuilder` holds the writer lock, commits, and keeps a durable
progress record
(:mod:`slimvec.indexer.progress`): rerunning an interrupted or killed ingest resumes after the last
commit; a changed input file, reducer or store under an unfinished index is refused unless
``rebuild``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.encoder import DEFAULT_ENCODER, default_encoder_threads, encoder_threads, ingest_encode_batch
from slimvec.errors import ConfigError
from slimvec.indexer.builder import DEFAULT_REDUCER, DEFAULT_STORE, BuildSpec, IndexBuilder
from slimvec.indexer.ingest_stream import DocumentStream
from slimvec.indexer.produce import Producer, Target, bulk_load
from slimvec.indexer.progress import ResumePlan, fingerprint, progress_bar
from slimvec.indexer.writer import REJECTS, IngestSummary, VectorBatch, strict_error
from slimvec.recipe import DEFAULT_RECIPE, apply_default_recipe, apply_recipe
from slimvec.sources.checks import STATE_DB, DuplicateTracker
from slimvec.sources.readers import Document, Reject, SourceSpec, detect_format, iter_records
from slimvec.sources.train_pairs import fit_reducer

__all__ = ["IngestOptions", "IngestSummary", "ingest", "ingest_with", "row_count", "add_declared_when_done", "reservoir_sample", "REJECTS",
           "VectorBatch", "DEFAULT_REDUCER", "DEFAULT_STORE"]

log = logging.getLogger(__name__)


@dataclass
class IngestOptions:
    """What to ingest and how (mirrors ``slimvec ingest`` options).

    Parameters
    ----------
    reducer : str or None
        Reducer spec; ``None`` means the existing index's, or the default reducer
        (:data:`slimvec.buildspec.DEFAULTS`) for a new index.
    store : str or None
        Store spec; ``None`` means the existing index's, or the default store for a new index.
    encoder : str or None
        Encoder spec or model folder; ``None`` means the existing index's, or ``minilm``.
    text_column, id_column, format, quoting : see :class:`~slimvec.sources.readers.SourceSpec`.
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
        (mcr2) is also fitted on (new index only); see :mod:`slimvec.sources.train_pairs`.
    recipe : str or None
        A recipe string or JSON file (:mod:`slimvec.recipe`): reducer, store, ``keep_full`` and
        the rescoring depth in one; ``reducer`` / ``store`` / ``keep_full`` given too must agree.
    default_recipe : str or None
        Recipe of a new index when none of ``recipe``, ``reducer``, ``store``, ``keep_full`` is
        given (:func:`slimvec.recipe.apply_default_recipe`); None: the default reducer and store without rescoring.
    threads : int or None
        Torch CPU threads of the encoder during the run (restored after); None:
        :func:`default_encoder_threads`.
    sync : bool
        Make the index equal to the input: run by :func:`slimvec.ops.sync.sync` (unchanged
        documents are not re-encoded, changed ones are, and documents whose id left the input are
        deleted once everything new is committed); ``ingest`` refuses it.
    force : bool
        With ``sync``: delete even when the input had unreadable rows or no document.
    device : str
        Torch device of the encoder (``auto``: CUDA when available, else CPU).
    encode_batch : int or None
        Texts per forward pass; None: :func:`slimvec.encoder.ingest_encode_batch` for the
        device (small on a CPU, hundreds on CUDA).
    encoder_instance : object or None
        A loaded encoder used instead of loading ``encoder`` (same interface as
        :class:`~slimvec.encoder.Encoder`: ``name``, ``dim``, ``encode``,
        ``max_seq_length``, ``model.tokenizer``): a caller that keeps one warm, or the encoder-free
        benchmark's (the checkout's ``benchmarks.kinds.ingest``).
    encoding : dict
        The build spec's encoding options (:data:`slimvec.buildspec.ENCODING_FIELDS`) of a new
        index; an existing index keeps its own, and a different one given is refused.
    payload_index : dict
        ``{field: kind}`` payload indexes built with the store before the first document
        (:attr:`slimvec.buildspec.BuildSpec.payload_index`; ``--payload-index``).
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
    recipe: str | None = None
    default_recipe: str | None = DEFAULT_RECIPE
    threads: int | None = None
    sync: bool = False
    force: bool = False
    device: str = "auto"
    encode_batch: int | None = None
    encoder_instance: Any = None
    encoding: dict[str, str | None] = field(default_factory=dict)
    payload_index: dict[str, str] = field(default_factory=dict)


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


def _progress(enabled: bool, total: int | None, description: str, unit: str = "docs"):
    return progress_bar(enabled, unit)  # rich bar on a terminal, plain lines in a log


def row_count(source: SourceSpec) -> int | None:
    """The input's rows when known before reading them (Parquet: its metadata), else ``None``."""
    if detect_format(source.path, source.format) != "parquet":
        return None
    from slimvec.sources.parquet_payload import parquet_rows

    return parquet_rows(source.path)


def _strict_records(records: Iterator[Document | Reject]) -> Iterator[Document | Reject]:
    for rec in records:
        if isinstance(rec, Reject) and not rec.kept:
            raise strict_error(rec)
        yield rec


def _fit_sample(source: SourceSpec, opts: IngestOptions, encoder: Any, progress: Any,
                cached: dict[int, np.ndarray]) -> tuple[np.ndarray, int]:
    """Reservoir-sample and encode the fit sample (vectors kept in ``cached`` by row for the
    stream); returns the sample and the input's row count."""
    task = progress.add_task("sampling input", total=row_count(source))
    records = iter_records(source)
    if opts.strict:
        records = _strict_records(records)
    sample, rows = reservoir_sample(records, opts.fit_sample, opts.seed)
    progress.update(task, total=rows, completed=rows)
    if not sample:
        raise ConfigError(f"{source.path} holds no ingestible document: nothing to fit the reducer "
                          "on (check --text-column and the file's rows).")
    sample.sort(key=lambda d: d.row)
    enc_task = progress.add_task(f"encoding fit sample ({len(sample):,})", total=len(sample))
    vectors = []
    for i in range(0, len(sample), opts.batch_size):
        chunk = sample[i:i + opts.batch_size]
        vectors.append(encoder.encode([d.text for d in chunk]))
        progress.advance(enc_task, len(chunk))
    X = np.concatenate(vectors)
    cached.update({d.row: X[i] for i, d in enumerate(sample)})
    progress.add_task(f"fitting {opts.reducer} on {len(X):,} vectors", total=None)
    return X, rows


def _first_vector(source: SourceSpec, encoder: Any, cached: dict[int, np.ndarray],
                  strict: bool) -> np.ndarray:
    """The 'fit sample' of a recipe without a reducer: the first document's vector (the identity
    takes only the dimension from it), not a sample of the input read and encoded on its own
    (issue 40 item 9); kept in ``cached`` so the stream does not encode it again."""
    from contextlib import closing

    with closing(iter_records(source)) as records:
        for rec in _strict_records(records) if strict else records:
            if isinstance(rec, Document):
                vec = encoder.encode([rec.text])
                cached[rec.row] = vec[0]
                return np.asarray(vec, dtype=np.float32)
    raise ConfigError(f"{source.path} holds no ingestible document: nothing to index (check "
                      "--text-column and the file's rows).")


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
    if opts.sync:  # the writer never deletes: a sync is an operation on the whole index
        raise ConfigError("IngestOptions(sync=True) is run by slimvec.ops.sync.sync(SRC, INDEX, "
                          "options), which ingests the changes and deletes what left the file; "
                          "call that instead.")
    folder = Path(index_dir)
    with IndexBuilder(folder, rebuild=opts.rebuild, notify=notify or log.info, strict=opts.strict,
                      checkpoint_seconds=opts.checkpoint_seconds,
                      checkpoint_batches=opts.checkpoint_batches) as builder:
        summary = _ingest_into(builder, Path(input_path), opts, on_batch, bulk=True)
    add_declared_when_done(folder, summary, opts.payload_index)
    return summary


def add_declared_when_done(folder: Path, summary: IngestSummary, payload_index: dict[str, str]) -> None:
    """A run with nothing to write (its input already complete) still adds the declared payload
    indexes the index lacks; a writing run builds them with the store (``IndexBuilder.open``)."""
    if summary.already_done and payload_index:
        from slimvec.index.folder import open_index

        with open_index(folder) as idx:
            for field_name, kind in payload_index.items():
                idx.create_payload_index(field_name, kind)


def ingest_with(builder: Any, input_path: str | os.PathLike[str], options: IngestOptions,
                on_batch: Callable[[int], None] | None = None) -> IngestSummary:
    """:func:`ingest` through a builder the caller entered and owns (the service's jobs lend
    their index writer's: :class:`slimvec.service.indexes.jobwrite.SharedBuilder`); returns the summary."""
    return _ingest_into(builder, Path(input_path), options, on_batch)


def _ingest_into(b: IndexBuilder, input_path: Path, opts: IngestOptions,
                 on_batch: Callable[[int], None] | None, bulk: bool = False) -> IngestSummary:
    """The ingest producer through the builder's one write sequence (``bulk``: a load that
    ends with the builder, so a FAISS graph may be built over float16 codes meanwhile)."""
    summary = b.build(_IngestProducer(input_path, opts, on_batch, bulk))
    if summary.already_done:
        return summary
    if summary.duplicates:
        log.warning("%d row(s) reused an earlier id with different text; the last one won "
                    "(listed in %s)", summary.duplicates, b.folder / REJECTS)
    log.info("ingested %d documents (%d rejected) into %s in %.1fs", summary.ingested,
             summary.rejected, b.folder, summary.total_seconds)
    return summary


class _IngestProducer(Producer):
    """Documents -> encoder -> :class:`VectorBatch` es (the encoder works a window ahead)."""

    def __init__(self, input_path: Path, opts: IngestOptions,
                 on_batch: Callable[[int], None] | None, bulk: bool = False) -> None:
        self.input_path, self.opts, self._on_batch, self.bulk = input_path, opts, on_batch, bulk
        self.label = str(input_path)
        self.source = SourceSpec(str(input_path), opts.text_column, opts.id_column, opts.format,
                                 opts.quoting)
        self.asked = opts  # as given: --reducer / --store named, before the recipe
        self.cached: dict[int, np.ndarray] = {}
        self.counted: list[int] = []
        self.tracker: DuplicateTracker | None = None

    def build_spec(self, b: Target) -> BuildSpec:
        old, opts = b.existing, self.opts
        defaulted = apply_default_recipe(opts, old)
        if old is None and opts.recipe is None:
            if defaulted.recipe is not None:
                defaulted = _small_corpus(defaulted, self.source, b.say)
            else:
                _say_partial_recipe(opts, b.say)
        self.opts = apply_recipe(defaulted)
        return BuildSpec.from_options(self.opts, encoder=self.opts.encoder or (
            old.encoder or DEFAULT_ENCODER if old is not None else DEFAULT_ENCODER),
            keep_full=self.opts.keep_full if old is None else None)

    def resolved(self, b: Target, spec: BuildSpec) -> None:
        self.spec = spec
        b.summary.recipe = spec.recipe or f"{spec.reducer}|{spec.store}" + (
            f"|keep_full={spec.keep_full}" if spec.keep_full else "")
        if b.existing is not None:
            _say_kept_recipe(self.asked, b.summary.recipe, b.folder, b.say)
        iter_records(self.source)  # fail fast on a missing file / unknown format

    def plan_key(self) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        resolved = self.input_path.resolve()
        columns = {"text_column": self.opts.text_column, "id_column": self.opts.id_column,
                   "format": self.opts.format}
        return resolved, fingerprint(resolved), columns

    def done_notice(self, b: Target) -> str:
        rows = b.existing.progress.next_row if b.existing and b.existing.progress else 0
        return (f"{self.input_path} was already ingested completely into {b.folder} ({rows:,} "
                "rows); nothing to do. Pass --rebuild to build the index anew.")

    @contextlib.contextmanager
    def running(self, b: Target, spec: BuildSpec) -> Iterator[None]:
        finished = False
        with _progress(self.opts.progress, None, "ingest") as self.progress, \
                encoder_threads(self.opts.threads or default_encoder_threads()):
            self.encoder = self.opts.encoder_instance or spec.load_encoder(
                self.opts.device, self.opts.encode_batch
                or ingest_encode_batch(self.opts.device, self.opts.batch_size))
            try:
                yield
                finished = not b.summary.interrupted
            finally:
                if self.tracker is not None:
                    self.tracker.close(delete=finished)

    def dim_in(self, b: Target) -> int:
        return int(self.encoder.dim)

    def open_spec(self, spec: BuildSpec) -> BuildSpec:
        return replace(spec, encoder_name=self.encoder.name)

    def fit(self) -> np.ndarray:
        if str(self.spec.reducer) == "none" and not self.opts.train_pairs:
            return _first_vector(self.source, self.encoder, self.cached, self.opts.strict)
        X, rows = _fit_sample(self.source, replace(self.opts, reducer=self.spec.reducer),
                              self.encoder, self.progress, self.cached)
        self.counted.append(rows)
        return X

    def fit_reducer(self, reducer: Any, X: np.ndarray) -> None:
        fit_reducer(reducer, X, self.opts.train_pairs, self.encoder, self.opts.batch_size)

    def begun(self, b: Target, plan: ResumePlan) -> None:
        self.tracker = DuplicateTracker(b.folder / STATE_DB, fresh=not plan.resuming)
        if self.bulk:
            bulk_load(b)
        b.on_commit = self.tracker.commit
        total = self.counted[0] if self.counted else row_count(self.source)  # Parquet: metadata
        self.task = self.progress.add_task(f"ingesting {self.input_path.name}", total=total,
                                           completed=plan.start_row if total else 0)

    def batches(self, b: Target, start_row: int) -> Iterator[VectorBatch]:
        assert b.manifest is not None and self.tracker is not None  # opened, begun
        return DocumentStream(self.source, self.encoder, self.opts.batch_size, self.cached,
                              self.tracker, b.summary, b.manifest.id_rule).batches(start_row)

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)

    def on_batch(self, next_row: int) -> None:
        if self._on_batch is not None:
            self._on_batch(next_row)


def _small_corpus(opts: IngestOptions, source: SourceSpec, say: Callable[[str], None]
                  ) -> IngestOptions:
    """The default recipe for a corpus too small to fit its reducer: full vectors, no reducer.

    A reducer of D components cannot be fitted on fewer than D documents (PCA-96 on 50 failed).
    Capping D at the document count would fit a basis on a handful of vectors that every later
    document is then reduced with; below D documents the full vectors cost little (1,536 B each
    for MiniLM) and are searched exactly, and they stay right whatever is added later. Only the
    first D documents of the input are counted, so a large input costs nothing here.
    """
    from contextlib import closing

    from slimvec.recipe import Recipe, resolve_recipe

    rec = resolve_recipe(opts.recipe)
    if rec.reducer == "none":
        return opts
    need = rec.dim_out(0)
    if need <= 1:
        return opts
    n = 0
    with closing(iter_records(source)) as records:
        for item in records:
            if isinstance(item, Document):
                n += 1
                if n >= need:
                    return opts
    small = Recipe(reducer="none", store=rec.store)
    say(f"small corpus: {source.path} holds {n:,} document(s), fewer than the {need} that the "
        f"default recipe's reducer {rec.reducer} needs to be fitted; this index keeps the full "
        f"encoder vectors instead (recipe {small}: exact search, nothing to rescore). When the "
        f"corpus has grown past {need} documents, rebuild it (--rebuild) to get the default "
        f"recipe {rec}; see docs/recipes.md.")
    return replace(opts, recipe=str(small))


def _say_partial_recipe(opts: IngestOptions, say: Callable[[str], None]) -> None:
    """Say loudly what a new index built from some of ``--reducer`` / ``--store`` /
    ``--keep-full`` gets: only what was named (no rescoring unless full vectors were asked for),
    not the rest of the default recipe (issue 27 item 6)."""
    if opts.recipe is not None or getattr(opts, "default_recipe", None) is None:
        return
    from slimvec.recipe import parse_recipe

    given = [f"--{k.replace('_', '-')}" for k in ("reducer", "store", "keep_full")
             if getattr(opts, k) is not None]
    if not given:
        return
    default = parse_recipe(opts.default_recipe)
    reducer = opts.reducer or DEFAULT_REDUCER
    store = opts.store or DEFAULT_STORE
    kept = (f"full vectors kept as {opts.keep_full} (search with --rescore R)" if opts.keep_full
            else "no full vectors kept, so no rescoring")
    say(f"recipe: {' and '.join(given)} given, so this index is {reducer} in {store} with {kept}; "
        f"the rest of the default recipe ({default}) is not applied. To keep its calibrated "
        f"rescoring, give the whole recipe instead: --recipe '{reducer}|{store}|rescore=auto,"
        f"keep_full=float16' (docs/recipes.md).")


def _say_kept_recipe(opts: IngestOptions, recipe: str, folder: Path,
                     say: Callable[[str], None]) -> None:
    """Say that an existing index keeps its recipe when ``--reducer`` / ``--store`` /
    ``--keep-full`` are given without ``--recipe``: a differing reducer or store was refused by the
    builder already, but alone they would have built a new index without rescoring (the README's
    second ingest)."""
    if opts.recipe is not None:
        return
    given = [f"--{k.replace('_', '-')}" for k in ("reducer", "store", "keep_full")
             if getattr(opts, k) is not None]
    if given:
        say(f"{folder} already holds an index: it keeps its recipe {recipe} ({' and '.join(given)} "
            f"given: an index keeps what it was built with; on a new index they alone give only "
            f"what they name, e.g. no rescoring). To build another recipe, use another --index "
            f"folder or --rebuild.")
