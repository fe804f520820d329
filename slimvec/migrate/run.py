"""Migrate an existing vector collection into a slimvec index: fit a reducer, stream, commit.

No text and no encoder: the reducer is fitted on a uniform sample of the existing vectors, then
every vector goes through :class:`slimvec.indexer.builder.IndexBuilder` (the commit loop of
``ingest``) with its id and payload. The manifest records ``encoder: null``, so the index is
searched with vectors from the original encoder. With ``keep_full`` the original vectors are also
written to a memory-mapped side file (:class:`~slimvec.connectors.fullvectors.FullVectors`),
committed at the same checkpoints, for ``Index.search(..., rescore=R)``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import ConfigError, DimensionMismatchError
from slimvec.indexer.builder import BuildSpec, IndexBuilder
from slimvec.indexer.produce import Producer, Target
from slimvec.indexer.progress import ResumePlan, progress_bar
from slimvec.indexer.writer import IngestSummary, VectorBatch
from slimvec.migrate.sources import SourceBatch, VectorSource, open_source
from slimvec.recipe import apply_default_recipe, apply_recipe
from slimvec.sources.checks import norm_outliers

__all__ = ["MigrateOptions", "migrate"]

log = logging.getLogger(__name__)


@dataclass
class MigrateOptions:
    """How to migrate (mirrors ``slimvec migrate`` options).

    Parameters
    ----------
    reducer : str or None
        Reducer spec; ``None``: the existing index's, or the default reducer for a new one.
    store : str or None
        Target store spec; ``None``: the existing index's, or the default store.
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
    recipe : str or None
        A recipe string or JSON file (:mod:`slimvec.recipe`): reducer, store, ``keep_full`` and
        the rescoring depth in one; ``reducer`` / ``store`` / ``keep_full`` given too must agree.
    encoder : str or None
        Encoder spec of the model that made the source's vectors, recorded in the manifest so the
        index is searched with texts too; its output dimension must be the source's. ``None``:
        the existing index's (a migration records none by default).
    metric : str or None
        ``cosine``, ``ip`` or ``l2``: what the index compares vectors by. ``None``: what the
        source records (hnswlib space, FAISS metric type, Qdrant distance), else the existing
        index's, else cosine. Naming one the source contradicts is allowed, with a notice.
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
    recipe: str | None = None
    encoder: str | None = None
    metric: str | None = None


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
    # the source first: an unreadable or refused source (strings, complex, mixed lengths) must
    # not leave an index folder behind
    with open_source(source) as src:
        _check_not_empty(src)
        encoder_name = _check_encoder(opts.encoder, src) if opts.encoder else None
        with IndexBuilder(index_dir, rebuild=opts.rebuild, notify=notify or log.info,
                          strict=opts.strict, checkpoint_seconds=opts.checkpoint_seconds,
                          checkpoint_batches=opts.checkpoint_batches) as builder:
            return _migrate_into(builder, src, opts, on_batch, encoder_name)


def _migrate_into(b: IndexBuilder, src: VectorSource, opts: MigrateOptions,
                  on_batch: Callable[[int], None] | None,
                  encoder_name: str | None = None) -> IngestSummary:
    """The migrate producer through the builder's one write sequence."""
    _check_not_empty(src)
    summary = b.build(_MigrateProducer(src, opts, on_batch, encoder_name))
    if not summary.already_done:
        log.info("migrated %d vectors (%d rejected) from %s into %s in %.1fs", summary.ingested,
                 summary.rejected, src.spec, b.folder, summary.total_seconds)
    return summary


class _MigrateProducer(Producer):
    """Source vectors -> :class:`VectorBatch` es (no encoder: ``encoder: null`` unless named)."""

    unit = "vector"

    def __init__(self, src: VectorSource, opts: MigrateOptions,
                 on_batch: Callable[[int], None] | None, encoder_name: str | None) -> None:
        self.src, self.opts, self.encoder_name = src, opts, encoder_name
        self.label = src.spec
        self._on_batch = on_batch
        self.total = 0

    def build_spec(self, b: Target) -> BuildSpec:
        src = self.src
        metric = _metric(self.opts.metric, src, b)
        opts = apply_recipe(apply_default_recipe(self.opts, b.existing, metric or "cosine"))
        self.opts = opts
        encoder = opts.encoder or (b.existing.encoder if b.existing is not None else None)
        store = _keep_collection_name(opts.store, src) if b.existing is None else opts.store
        return BuildSpec.from_options(opts, store=store, encoder=encoder, text_column=None,
                                      source=src.spec, encoder_name=self.encoder_name,
                                      metric=metric)

    def resolved(self, b: Target, spec: BuildSpec) -> None:
        self.spec, old = spec, b.existing
        if old is not None and old.dim_in != self.src.dim:
            raise DimensionMismatchError(f"reducer input of {b.folder} vs vectors of "
                                         f"{self.src.spec}", old.dim_in, self.src.dim,
                                         "Migrate into another --index folder or pass --rebuild.")

    def plan_key(self) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        src_path = getattr(self.src, "path", None)  # file sources have one; collections do not
        input_name: Any = self.src.spec
        if src_path is not None and Path(src_path).is_file():
            input_name = Path(src_path).resolve()
        return input_name, self.src.fingerprint(), {"source": self.src.spec}

    def done_notice(self, b: Target) -> str:
        rows = b.existing.progress.next_row if b.existing and b.existing.progress else 0
        return (f"{self.src.spec} was already migrated completely into {b.folder} ({rows:,} "
                "vectors); nothing to do. Pass --rebuild to build the index anew.")

    @contextlib.contextmanager
    def running(self, b: Target, spec: BuildSpec) -> Iterator[None]:
        self.total = self.src.count()
        with progress_bar(self.opts.progress, "vectors") as self.progress:
            yield

    def dim_in(self, b: Target) -> int:
        return int(self.src.dim)

    def fit(self) -> np.ndarray:
        n_fit = min(self.opts.fit_sample, self.total)
        self.progress.add_task(f"sampling and fitting {self.spec.reducer} on {n_fit:,} vectors",
                               total=None)
        sample = self.src.sample(n_fit, self.opts.seed)
        sample = sample[np.isfinite(sample).all(axis=1)]  # bad rows become rejects later
        sample = sample[~norm_outliers(sample)]  # so do rows with an absurd norm (1e10)
        if not len(sample):
            raise ConfigError(f"{self.src.spec}: no finite vector in a sample of {n_fit:,}; "
                              "nothing to fit the reducer on. Check the source's vectors.")
        return sample

    def begun(self, b: Target, plan: ResumePlan) -> None:
        assert b.manifest is not None
        self.src.id_rule = b.manifest.id_rule  # an existing index keeps its id rule
        self.task = self.progress.add_task(f"migrating {self.src.spec}", total=self.total,
                                           completed=plan.start_row)

    def batches(self, b: Target, start_row: int) -> Iterator[VectorBatch]:
        return (_vector_batch(sb, self.src.spec)
                for sb in self.src.batches(start_row, self.opts.batch_size))

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)

    def on_batch(self, next_row: int) -> None:
        if self._on_batch is not None:
            self._on_batch(next_row)


def _metric(asked: str | None, src: VectorSource, b: Target) -> str | None:
    """The metric of the migration: the one asked, else the source's, else the existing index's
    (``None``: cosine for a new index). A source whose metric slimvec has none for is refused."""
    from slimvec.buildspec import METRICS, check_metric

    if asked is not None:
        check_metric(asked, "--metric")
        if src.metric is not None and src.metric != asked:
            b.say(f"note: {src.spec} compares its vectors by {src.metric!r}; indexing by "
                  f"{asked!r} as asked (--metric)")
        return asked
    if src.metric is not None and src.metric not in METRICS:
        raise ConfigError(f"{src.spec} compares its vectors by {src.metric!r}, which slimvec "
                          f"cannot index ({', '.join(METRICS)}); pass --metric to choose one.")
    if src.metric is None and b.existing is not None:
        return b.existing.metric
    if src.metric == "ip" and _unit_length(src):
        b.say(f"note: {src.spec} compares its vectors by inner product and they are unit length "
              "(a sample of them), where it equals cosine: indexing by cosine (--metric ip to "
              "keep inner product)")
        return "cosine"
    return src.metric


#: vectors sampled to tell an inner-product source of unit-length vectors (FAISS's way to
#: search by cosine: IndexFlatIP over normalised vectors) from a true inner-product one
_UNIT_SAMPLE, _UNIT_TOL = 256, 1e-3


def _unit_length(src: VectorSource) -> bool:
    """True when a sample of the source's finite vectors all have length 1 (within 1e-3)."""
    sample = src.sample(min(_UNIT_SAMPLE, src.count()), seed=0)
    sample = sample[np.isfinite(sample).all(axis=1)]
    return bool(len(sample)) and bool(np.all(np.abs(np.linalg.norm(sample, axis=1) - 1) < _UNIT_TOL))


def _keep_collection_name(store: str | None, src: VectorSource) -> str | None:
    """A store that names collections (Qdrant) gets the source collection's name unless the spec
    names one: migrating ``qdrant:URL/docs`` into ``qdrant:URL2`` made a collection ``slimvec``.
    Whether a store names collections is asked of the store (does its spec take ``collection=``),
    not read from its name."""
    from dataclasses import replace as dc_replace

    from slimvec.connectors import canonical_store_spec, parse_store_spec

    name = getattr(src, "collection", None)
    if not store or not name:
        return store
    parsed = parse_store_spec(store)
    if "collection" in parsed.options:
        return store
    try:
        return canonical_store_spec(dc_replace(parsed, options={**parsed.options,
                                                                "collection": str(name)}))
    except ConfigError:  # the store takes no collection option
        return store


def _check_encoder(spec: str, src: VectorSource) -> str:
    """Load the encoder named by ``--encoder`` and check it makes vectors of the source's
    dimension (before any index folder is made); return its model name."""
    encoder = BuildSpec(encoder=spec).load_encoder()
    if encoder.dim != src.dim:
        raise DimensionMismatchError(
            f"--encoder {spec} output vs vectors of {src.spec}", src.dim, encoder.dim,
            "Record the encoder that made these vectors, or migrate without --encoder (search "
            "then takes query vectors: slimvec search --vectors FILE).")
    return str(encoder.name)


def _check_not_empty(src: VectorSource) -> None:
    if src.dim <= 0 or src.count() == 0:
        raise ConfigError(f"{src.spec} holds no vectors: nothing to migrate.")


def _vector_batch(b: SourceBatch, spec: str) -> VectorBatch:
    lo = b.next_row - len(b.ids)
    return VectorBatch(b.ids, b.vectors, b.payloads, list(b.rejects), b.next_row,
                       rows=b.rows or list(range(lo, b.next_row)), lines=[None] * len(b.ids), source=spec)
