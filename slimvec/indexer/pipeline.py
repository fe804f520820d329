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

import logging
import os
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from slimvec.errors import ConfigError
from slimvec.ids import doc_ids
from slimvec.indexer.builder import DEFAULT_REDUCER, DEFAULT_STORE, BuildSpec, IndexBuilder
from slimvec.indexer.checks import STATE_DB, DuplicateTracker, truncation_rejects
from slimvec.indexer.encoder import (
    DEFAULT_ENCODER, INGEST_ENCODE_BATCH, default_encoder_threads, encoder_threads,
)
from slimvec.indexer.progress import fingerprint, progress_bar
from slimvec.recipe import DEFAULT_RECIPE, apply_default_recipe, apply_recipe
from slimvec.indexer.sources import (
    Document, Reject, SourceSpec, iter_batches, iter_records, stored_payload,
)
from slimvec.indexer.train_pairs import fit_reducer
from slimvec.indexer.writer import REJECTS, IngestSummary, VectorBatch, strict_error

__all__ = ["IngestOptions", "IngestSummary", "ingest", "ingest_with", "reservoir_sample", "REJECTS",
           "VectorBatch", "DEFAULT_REDUCER", "DEFAULT_STORE"]

log = logging.getLogger(__name__)


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
    recipe : str or None
        A recipe string or JSON file (:mod:`slimvec.recipe`): reducer, store, ``keep_full`` and
        the rescoring depth in one; ``reducer`` / ``store`` / ``keep_full`` given too must agree.
    default_recipe : str or None
        Recipe of a new index when none of ``recipe``, ``reducer``, ``store``, ``keep_full`` is
        given (:func:`slimvec.recipe.apply_default_recipe`); None: ``pca:96`` without rescoring.
    threads : int or None
        Torch CPU threads of the encoder during the run (restored after); None:
        :func:`default_encoder_threads`.
    sync : bool
        Make the index equal to the input (:func:`slimvec.indexer.sync.sync`): unchanged
        documents are not re-encoded, changed ones are, and documents whose id left the input are
        deleted once everything new is committed. ``ingest`` then returns a ``SyncSummary``.
    force : bool
        With ``sync``: delete even when the input had unreadable rows or no document.
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


def _strict_records(records: Iterator[Document | Reject]) -> Iterator[Document | Reject]:
    for rec in records:
        if isinstance(rec, Reject) and not rec.kept:
            raise strict_error(rec)
        yield rec


def _fit_sample(source: SourceSpec, opts: IngestOptions, encoder: Any, progress: Any,
                cached: dict[int, np.ndarray]) -> tuple[np.ndarray, int]:
    """Reservoir-sample and encode the fit sample (vectors kept in ``cached`` by row for the
    stream); returns the sample and the input's row count."""
    task = progress.add_task("sampling input", total=None)
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
    if opts.sync:
        from slimvec.indexer.sync import sync

        return sync(input_path, index_dir, opts, first_ingest=ingest, force=opts.force,
                    notify=notify, on_batch=on_batch)
    folder = Path(index_dir)
    with IndexBuilder(folder, rebuild=opts.rebuild, notify=notify or log.info, strict=opts.strict,
                      checkpoint_seconds=opts.checkpoint_seconds,
                      checkpoint_batches=opts.checkpoint_batches) as builder:
        return _ingest_into(builder, Path(input_path), opts, on_batch)


def ingest_with(builder: Any, input_path: str | os.PathLike[str], options: IngestOptions,
                on_batch: Callable[[int], None] | None = None) -> IngestSummary:
    """:func:`ingest` through a builder the caller entered and owns (the service's jobs lend
    their index writer's: :class:`slimvec.service.jobwrite.SharedBuilder`); returns the summary."""
    return _ingest_into(builder, Path(input_path), options, on_batch)


def _ingest_into(b: IndexBuilder, input_path: Path, opts: IngestOptions,
                 on_batch: Callable[[int], None] | None) -> IngestSummary:
    """The ingest producer: documents -> encoder -> :class:`VectorBatch` es for the builder."""
    from slimvec.indexer.encoder import Encoder

    old = b.existing
    asked = opts
    source = SourceSpec(str(input_path), opts.text_column, opts.id_column, opts.format,
                        opts.quoting)
    defaulted = apply_default_recipe(opts, old)
    if old is None and opts.recipe is None:
        if defaulted.recipe is not None:
            defaulted = _small_corpus(defaulted, source, b.say)
        else:
            _say_partial_recipe(opts, b.say)
    opts = apply_recipe(defaulted)
    spec = b.resolve(BuildSpec.from_options(opts, encoder=opts.encoder or (
        old.encoder or DEFAULT_ENCODER if old is not None else DEFAULT_ENCODER),
        keep_full=opts.keep_full if old is None else None))
    b.summary.recipe = spec.recipe or f"{spec.reducer}|{spec.store}" + (
        f"|keep_full={spec.keep_full}" if spec.keep_full else "")
    if old is not None:
        _say_kept_recipe(asked, b.summary.recipe, b.folder, b.say)
    iter_records(source)  # fail fast on a missing file / unknown format
    resolved = input_path.resolve()
    columns = {"text_column": opts.text_column, "id_column": opts.id_column, "format": opts.format}
    plan = b.plan(resolved, fingerprint(resolved), columns)
    b.summary.input = str(input_path)
    if plan.already_done:
        b.say(f"{input_path} was already ingested completely into {b.folder} "
              f"({old.progress.next_row:,} rows); nothing to do. Pass --rebuild to build the "
              "index anew.")
        return b.done_summary(str(input_path))
    with _progress(opts.progress, None, "ingest") as progress, \
            encoder_threads(opts.threads or default_encoder_threads()):
        encoder = Encoder(spec.encoder, batch_size=min(opts.batch_size, INGEST_ENCODE_BATCH))
        t_start = time.perf_counter()  # model loading is a constant, not throughput
        cached: dict[int, np.ndarray] = {}
        counted: list[int] = []

        def fit() -> np.ndarray:
            X, rows = _fit_sample(source, replace(opts, reducer=spec.reducer), encoder, progress,
                                  cached)
            counted.append(rows)
            return X

        b.open(replace(spec, encoder_name=encoder.name), encoder.dim, fit,
               lambda r, X: fit_reducer(r, X, opts.train_pairs, encoder, opts.batch_size))
        if plan.resuming:
            b.say(f"resuming at row {plan.start_row:,} of {input_path} (rows before it are "
                  f"committed in {b.folder})")
        b.begin(plan)
        tracker = DuplicateTracker(b.folder / STATE_DB, fresh=not plan.resuming)
        b.on_commit = tracker.commit
        id_field = opts.id_column or "id"

        def encode(window: list[list[Document]]) -> list[tuple[np.ndarray, list[Reject]]]:
            # one encoder call over the window: sentence-transformers sorts it by length, so its
            # batches pad little; tokenizer and model stay in this one thread (a fast tokenizer is
            # not safe to share)
            t0 = time.perf_counter()
            truncated = [truncation_rejects(encoder, docs, source.path, opts.text_column)
                         for docs in window]
            flat = [d for docs in window for d in docs]
            vecs = _encode_batch(encoder, flat, cached)
            b.summary.encode_seconds += time.perf_counter() - t0
            out, lo = [], 0
            for docs, trunc in zip(window, truncated):
                out.append((vecs[lo:lo + len(docs)], trunc))
                lo += len(docs)
            return out

        def check(ids: np.ndarray, docs: list[Document]) -> list[Reject]:
            # as each batch goes to the builder, not when it is read ahead: the tracker's state
            # is committed with the builder's commits, so it must not run ahead of the store
            return tracker.check(ids, docs, source.path, id_field)

        def batches() -> Iterator[VectorBatch]:
            # the encoder works on the next window of batches while the builder reduces and
            # writes this one; each batch is still committed on its own
            window: list[list[Document]] = []
            metas: list[tuple[np.ndarray, list[Reject], int]] = []
            with _Ahead(encode) as ahead:
                for docs, rejects, next_row in iter_batches(source, opts.batch_size,
                                                            plan.start_row):
                    ids = doc_ids([d.id for d in docs], b.manifest.id_rule)
                    window.append(docs)
                    metas.append((ids, rejects, next_row))
                    if sum(len(w) for w in window) < _ENCODE_WINDOW:
                        continue
                    yield from _split(ahead.push(window, metas), source.path, check)
                    window, metas = [], []
                if window:
                    yield from _split(ahead.push(window, metas), source.path, check)
                yield from _split(ahead.drain(), source.path, check)

        total = counted[0] if counted else None
        task = progress.add_task(f"ingesting {input_path.name}", total=total,
                                 completed=plan.start_row if total else 0)
        t_stream = time.perf_counter()
        finished = False
        try:
            summary = b.run(batches(), lambda n: progress.advance(task, n), on_batch)
            finished = not summary.interrupted
        finally:
            tracker.close(delete=finished)
    summary.seconds = time.perf_counter() - t_stream
    summary.total_seconds = time.perf_counter() - t_start
    if summary.duplicates:
        log.warning("%d row(s) reused an earlier id with different text; the last one won "
                    "(listed in %s)", summary.duplicates, b.folder / REJECTS)
    log.info("ingested %d documents (%d rejected) into %s in %.1fs", summary.ingested,
             summary.rejected, b.folder, summary.total_seconds)
    return summary


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


#: documents encoded in one call in the stream (several batches; each is committed on its own)
_ENCODE_WINDOW = 2048


def _split(done: tuple[list[list[Document]], Any, Any] | None, source: str,
           check: Callable[[np.ndarray, list[Document]], list[Reject]]) -> Iterator[VectorBatch]:
    """The batches of one encoded window, in order (``check`` adds duplicate-id warnings)."""
    if done is None:
        return
    window, metas, encoded = done
    for docs, (ids, rejects, next_row), (vecs, truncated) in zip(window, metas, encoded):
        warnings = check(ids, docs)
        yield VectorBatch(ids, vecs, [stored_payload(d) for d in docs], rejects + warnings + truncated,
                          next_row,
                          rows=[d.row for d in docs], lines=[d.line for d in docs], source=source)


class _Ahead:
    """Run ``work(docs)`` for the next window in a worker thread while the caller handles this one.

    ``push`` submits a window and returns the previous one as ``(docs, meta, work result)``;
    ``drain`` returns the last. Batches come back in order; on exit an unfinished batch is waited
    for (torch releases the GIL while encoding, so the overlap is real on a multi-core machine).
    """

    def __init__(self, work: Callable[[Any], Any]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._work = work
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="slimvec-encode")
        self._pending: tuple[Any, Any, Any] | None = None

    def __enter__(self) -> "_Ahead":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def push(self, docs: Any, meta: Any) -> tuple[Any, Any, Any] | None:
        done = self.drain()
        self._pending = (docs, meta, self._pool.submit(self._work, docs))
        return done

    def drain(self) -> tuple[Any, Any, Any] | None:
        if self._pending is None:
            return None
        docs, meta, future = self._pending
        self._pending = None
        return docs, meta, future.result()


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
