"""``slimvec ingest --engine ray``: Ray Data readers and encoder actors; a FAISS index's segments
written on the workers.

The run, in order:

1. the driver lists the input files (a file, a folder or a glob) and opens an
   :class:`~slimvec.indexer.builder.IndexBuilder` (the one committer: writer lock, folder safety,
   spec checks, manifest) before any Ray work;
2. new index: a reservoir sample over all files (the single-process draw), encoded by the actor
   pool; the builder fits the reducer once on the driver and saves it (JSON + safetensors);
3. Ray Data reads every file in tasks (:class:`~slimvec.engines.actors.ReadBlocks`, the
   single-process parsers and bad-row rules) into blocks of ``batch_size`` rows, and an actor pool
   (:class:`~slimvec.engines.actors.EncodeReduce`; ``workers`` actors, ``gpus_per_worker`` GPUs
   each) encodes and reduces them with the saved artifact, returning one 2-D array per block and
   ids by the manifest's ``id_rule``;
4. a FAISS store (it adopts segments): a Ray task per ``segment_docs`` documents
   (:func:`~slimvec.engines.actors.write_segment_blocks`, at most ``workers`` at once, no CPU reserved) writes their blocks into a
   segment folder inside the index (on storage every node sees) and builds its graph there; the
   driver adopts each finished segment whole (:mod:`slimvec.indexer.segments`) and commits, so no
   vector reaches the driver. Other stores: the driver hands each block to the builder as a
   ``VectorBatch(reduced=True)``, which upserts it. Either way rejects go to the index's
   ``rejects.jsonl``, and each commit records the committed blocks ``(file, k)`` in the manifest
   (``progress.committed`` of the typed :class:`~slimvec.index.manifest.Progress`).

At-least-once delivery: Ray restarts dead actors and retries their tasks, so a block may arrive
twice; the driver writes a block once per run (a set of the blocks seen) and upserts are by
deterministic id, so a block written again after a crash overwrites itself. A killed driver is
resumed by the same command: committed blocks are skipped (each input file is re-parsed to reach
its remaining blocks, which costs reading, not encoding), rejects.jsonl is cut back to the last
commit, and segment folders no commit adopted are removed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.encoder import DEFAULT_ENCODER, INGEST_ENCODE_BATCH, model_name, resolve_model
from slimvec.engines.actors import EncodeReduce, artifact_bytes, read_blocks, sample_key, write_segment_blocks
from slimvec.engines.blocks import InputFile, doc_to_json, expand_inputs, reject_from_json, sample_documents
from slimvec.engines.preflight import NodeTimes, capacity_wait, check_nodes_see, node_address, wait_for_capacity
from slimvec.engines.runtime import require_ray, start_ray
from slimvec.errors import ConfigError
from slimvec.index.folder import REDUCER_DIR
from slimvec.index.manifest import Manifest, Progress
from slimvec.indexer.builder import BuildSpec, IndexBuilder
from slimvec.indexer.pipeline import add_declared_when_done, row_count
from slimvec.indexer.produce import Producer, Target, bulk_load
from slimvec.indexer.progress import ResumePlan, fingerprint, progress_bar
from slimvec.indexer.segments import adopts_segments, clear_segments
from slimvec.indexer.writer import IngestSummary, VectorBatch
from slimvec.models import is_default_model
from slimvec.recipe import apply_default_recipe, apply_recipe
from slimvec.sources.train_pairs import fit_reducer

__all__ = ["RayOptions", "ray_ingest"]

log = logging.getLogger(__name__)


@dataclass
class RayOptions:
    """How to run on Ray (mirrors ``--ray-address``, ``--workers``, ``--gpus-per-worker``).

    Parameters
    ----------
    address : str or None
        ``None`` starts a local runtime (advertised as 127.0.0.1, no dashboard); ``auto`` / ``HOST:PORT`` joins
        a running cluster.
    workers : int
        Encoder actors.
    gpus_per_worker : float
        GPUs reserved per actor (0: CPU encoding).
    cpus_per_worker : float
        CPUs reserved per actor (also its torch threads, rounded).
    local_cpus : int or None
        CPUs of a local runtime (default: ``workers × cpus_per_worker``).
    capacity_wait : float or None
        Joining a cluster: seconds to wait for room for one encoder actor before the error that
        says what is missing (default: ``$SLIMVEC_RAY_CAPACITY_WAIT``, else 300).
    segment_docs : int
        A store that adopts segments (FAISS): documents per segment a Ray task writes and
        builds the graph of on a worker (no CPU reserved, at most ``workers`` at once), which the driver adopts whole.
    """

    address: str | None = None
    workers: int = 2
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0
    local_cpus: int | None = None
    capacity_wait: float | None = None
    segment_docs: int = 65_536


def _plan_resume(folder: Path, progress: Progress | None, inputs: list[dict[str, Any]],
                 settings: dict[str, Any]) -> tuple[str, dict[int, set[int]]]:
    """``new`` (add to the index), ``resume`` (same unfinished run) or ``done``."""
    if progress is None:
        return "new", {}
    same = (progress.engine == "ray" and progress.inputs == inputs
            and progress.columns == settings)
    if same:
        committed = {int(k): set(v) for k, v in (progress.committed or {}).items()}
        return ("done" if progress.state == "done" else "resume"), committed
    if progress.state != "done":
        raise ConfigError(
            f"{folder} holds an unfinished ingest of {progress.input or 'other input'} "
            f"({progress.engine or 'single-process'} engine, other files, columns or batch "
            "size). Rerun that command to finish it, or pass --rebuild to build the index anew.")
    return "new", {}


def _actor_args(ray_opts: RayOptions) -> dict[str, Any]:
    ray = require_ray()
    # Ray Data restarts dead actors and retries their tasks by default (max_restarts and
    # max_task_retries -1); naming them went through **ray_remote_args, deprecated in Ray 2.60
    return {"compute": ray.data.ActorPoolStrategy(size=int(ray_opts.workers)), "batch_size": 1,
            "num_cpus": float(ray_opts.cpus_per_worker),
            "num_gpus": float(ray_opts.gpus_per_worker) or None}


def _encode_sample(sample: list[tuple[int, Any]], spec: BuildSpec, batch_size: int,
                   ray_opts: RayOptions, text_column: str) -> np.ndarray:
    """Encode the fit sample on the actor pool, chunked as the single-process ingest chunks it."""
    ray = require_ray()
    chunks = [{"file": 0, "block": k, "rows": 0, "path": "", "rejects": "[]",
               "docs": json.dumps([doc_to_json(d) for _, d in sample[i:i + batch_size]],
                                  ensure_ascii=False)}
              for k, i in enumerate(range(0, len(sample), batch_size))]
    ds = ray.data.from_items(chunks, override_num_blocks=len(chunks)).map_batches(
        EncodeReduce, fn_constructor_kwargs={"spec": spec.to_dict(), "reducer_files": None,
                                             "encode_batch": min(batch_size, INGEST_ENCODE_BATCH),
                                             "text_column": text_column,
                                             "threads": max(1, round(ray_opts.cpus_per_worker))},
        **_actor_args(ray_opts))
    parts = {int(r["block"]): np.asarray(r["vectors"], dtype=np.float32) for r in ds.iter_rows()}
    return np.concatenate([parts[k] for k in range(len(chunks))])


def _fit_sample(files: list[InputFile], opts: Any, ray_opts: RayOptions, spec: BuildSpec,
                progress: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """The fit sample encoded on the actor pool: ``(keys, vectors, rows read)`` (keys:
    :func:`sample_key`), with the single-process ingest's progress lines."""
    task = progress.add_task("sampling input", total=None)
    sample, rows = sample_documents(files, opts.fit_sample, opts.seed)
    progress.update(task, total=rows, completed=rows)
    if not sample:
        raise ConfigError(f"{files[0].spec.path} and the other inputs hold no ingestible document: "
                          "nothing to fit the reducer on (check --text-column).")
    task = progress.add_task(f"encoding fit sample ({len(sample):,})", total=len(sample))
    X = _encode_sample(sample, spec, opts.batch_size, ray_opts, opts.text_column)
    progress.update(task, completed=len(sample))
    keys = np.array([sample_key(fi, d.row) for fi, d in sample], dtype=np.int64)
    return keys, X, rows


def ray_ingest(input_path: str, index_dir: str | Path, options: Any, ray_opts: RayOptions | None = None,
               notify: Callable[[str], None] | None = None) -> IngestSummary:
    """Ingest a file, folder or glob into an index folder with Ray (see module docstring).

    Parameters
    ----------
    input_path : str
        A file, a folder or a glob of JSONL / CSV / TSV / Parquet / text files.
    index_dir : path
        Index folder (created on first use; an existing index is added to or resumed).
    options : IngestOptions
        The single-process options, the default recipe included (``train_pairs`` is not
        supported here).
    ray_opts : RayOptions

    Raises
    ------
    MissingDependencyError
        Ray Data is not installed.
    ConfigError
        Bad input or options, another unfinished ingest in the folder, a bad row under ``strict``.
    """
    ray_opts = ray_opts or RayOptions()
    say = notify or log.info
    require_ray()
    if options.train_pairs:
        raise ConfigError("--train-pairs is not supported with --engine ray yet; ingest in one "
                          "process for it.")
    if ray_opts.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {ray_opts.workers}.")
    files = expand_inputs(str(input_path), options.text_column, options.id_column, options.format)
    inputs = [{"path": f.spec.path, "fingerprint": fingerprint(f.spec.path)} for f in files]
    settings = {"text_column": options.text_column, "id_column": options.id_column,
                "format": options.format, "batch_size": int(options.batch_size)}
    with IndexBuilder(Path(index_dir), rebuild=options.rebuild, notify=say,
                      strict=options.strict, checkpoint_seconds=options.checkpoint_seconds,
                      checkpoint_batches=options.checkpoint_batches) as b:
        # folder checks and the lock come before any Ray work (started in running())
        producer = _RayProducer(files, inputs, settings, options, ray_opts)
        summary = b.build(producer)
    summary.encode_seconds = producer.times.encode_seconds
    summary.nodes = producer.times.to_json()
    add_declared_when_done(Path(index_dir), summary, options.payload_index)
    if not summary.already_done:
        log.info("ray engine: %d documents (%d rejected) into %s in %.1fs", summary.ingested,
                 summary.rejected, Path(index_dir), summary.total_seconds)
    return summary


class _RayProducer(Producer):
    """Input files -> Ray Data blocks encoded and reduced by the actor pool -> reduced
    :class:`VectorBatch` es; its progress record lists the committed blocks."""

    def __init__(self, files: list[InputFile], inputs: list[dict[str, Any]],
                 settings: dict[str, Any], opts: Any, ray_opts: RayOptions) -> None:
        self.files, self.inputs, self.settings = files, inputs, settings
        self.opts, self.ray_opts = opts, ray_opts
        self.label = ", ".join(f.spec.path for f in files)
        self.committed: dict[int, set[int]] = {}
        self.keys: np.ndarray | None = None
        self.vectors: np.ndarray | None = None
        self.times = NodeTimes()
        self.rows: int | None = None  # counted by the fit sample's read, else from metadata

    def build_spec(self, b: Target) -> BuildSpec:
        old = b.existing
        # the default recipe and --recipe expand into reducer, store, keep_full as locally
        self.opts = opts = apply_recipe(apply_default_recipe(self.opts, old))
        return BuildSpec.from_options(
            opts, encoder=opts.encoder or (old.encoder if old else None) or DEFAULT_ENCODER,
            keep_full=opts.keep_full if old is None else None)

    def plan(self, b: Target) -> ResumePlan:
        old = b.existing.progress if b.existing is not None else None
        mode, self.committed = _plan_resume(b.folder, old, self.inputs, self.settings)
        resuming = mode == "resume" and old is not None
        return ResumePlan(start_row=old.next_row if resuming and old else 0,
                          rejects_bytes=old.rejects_bytes if resuming and old else None,
                          resuming=resuming, already_done=mode == "done")

    def done_notice(self, b: Target) -> str:
        return (f"{self.label} was already ingested completely into {b.folder}; nothing to do. "
                "Pass --rebuild to build the index anew.")

    def resuming_notice(self, b: Target, plan: ResumePlan) -> str:
        return (f"resuming: {sum(map(len, self.committed.values())):,} committed block(s) of "
                f"{len(self.files)} file(s) are skipped")

    @contextlib.contextmanager
    def running(self, b: Target, spec: BuildSpec) -> Iterator[None]:
        if b.existing is None:
            resolve_model(spec.encoder)  # fail fast on a bad encoder spec, before Ray starts
        self.opts, self.spec = replace(self.opts, encoder=spec.encoder), spec
        ray_opts = self.ray_opts
        started = start_ray(ray_opts.address, ray_opts.local_cpus
                            or max(1, round(ray_opts.workers * ray_opts.cpus_per_worker)))
        try:
            if ray_opts.address:  # a cluster: what its nodes see and hold, before any work
                _preflight(self.files, spec, ray_opts, b.say, b.folder)
            with progress_bar(self.opts.progress) as self.progress:  # as slimvec ingest's
                yield
        finally:
            if started:
                require_ray().shutdown()

    def dim_in(self, b: Target) -> int:
        if b.existing is not None:
            return int(b.existing.dim_in)
        self.keys, self.vectors, self.rows = _fit_sample(self.files, self.opts, self.ray_opts,
                                                         self.spec, self.progress)
        return int(self.vectors.shape[1])

    def open_spec(self, spec: BuildSpec) -> BuildSpec:
        return spec if self.vectors is None else replace(spec, encoder_name=model_name(spec.encoder))

    def fit(self) -> np.ndarray:
        assert self.vectors is not None  # dim_in() encoded the sample of a new index
        return self.vectors

    def fit_reducer(self, reducer: Any, X: np.ndarray) -> None:
        self.progress.add_task(f"fitting {self.spec.reducer} on {len(X):,} vectors", total=None)
        fit_reducer(reducer, X, None, None, self.opts.batch_size)

    def progress_record(self, b: Target, plan: ResumePlan) -> Progress:
        return Progress(input=self.label, columns=self.settings, engine="ray",
                        inputs=self.inputs,
                        committed={str(k): sorted(v) for k, v in self.committed.items()})

    def begun(self, b: Target, plan: ResumePlan) -> None:
        bulk_load(b)  # as slimvec ingest: one build, the same graph
        clear_segments(b.folder)  # written by a run killed before it adopted them
        self.written: list[tuple[int, int]] = []
        manifest = b.manifest
        assert manifest is not None and manifest.progress is not None

        def on_commit() -> None:  # after the store flushed, before the manifest records progress
            for f, k in self.written:
                self.committed.setdefault(f, set()).add(k)
            self.written.clear()
            manifest.progress.committed = {str(k): sorted(v)
                                           for k, v in sorted(self.committed.items())}

        b.on_commit = on_commit
        counts = [row_count(f.spec) for f in self.files]  # Parquet: from its metadata
        total = self.rows if self.rows is not None else (
            sum(c for c in counts if c is not None) if None not in counts else None)
        name = Path(self.files[0].spec.path).name if len(self.files) == 1 else \
            f"{len(self.files)} files"
        self.task = self.progress.add_task(
            f"ingesting {name} ({self.ray_opts.workers} Ray workers)", total=total,
            completed=plan.start_row if total else 0)

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)

    def batches(self, b: Target, start_row: int) -> Iterator[VectorBatch]:
        assert b.manifest is not None
        ds = _dataset(b.folder, b.manifest, self.files, self.committed, self.opts, self.ray_opts,
                      self.keys, self.vectors)
        dim_out, dim_in = int(b.manifest.dim_out), int(b.manifest.dim_in)
        seen = {(f, k) for f, blocks in self.committed.items() for k in blocks}
        rows_done = start_row
        paths = {f.index: f.spec.path for f in self.files}
        known: dict[str, str] = {}
        driver = node_address(require_ray().get_runtime_context().get_node_id(), known)
        for row in ds.iter_rows():
            if "segment" in row:  # written and built on a worker: adopted whole
                blocks = [(int(f), int(k)) for f, k in json.loads(row["blocks"])]
                new = [key for key in blocks if key not in seen]
                if not new:  # a retried task delivered it again
                    shutil.rmtree(str(row["segment"]), ignore_errors=True)
                    continue
                seen.update(new)
                self.written.extend(new)
                rows_done += int(row["rows"])
                for node, (n_blocks, docs, secs) in json.loads(row["encoded"]).items():
                    self.times.encoded(node_address(node, known), int(docs), float(secs), int(n_blocks))
                self.times.wrote(node_address(str(row["node"]), known), float(row["write_seconds"]))
                t0 = time.perf_counter()
                yield VectorBatch(np.empty(0, np.int64), np.empty((0, dim_out), np.float32), [], [],
                                  rows_done, source=self.label, segment=str(row["segment"]))
                self.times.wrote(driver, time.perf_counter() - t0)  # the adoption and commit
                continue
            key = (int(row["file"]), int(row["block"]))
            if key in seen:  # a retried task delivered a block again
                log.debug("block %s delivered twice; written once", key)
                continue
            seen.add(key)
            self.written.append(key)
            rows_done += int(row["rows"])
            vecs = np.asarray(row["vectors"], dtype=np.float32).reshape(-1, dim_out)
            full = (np.asarray(row["full"], dtype=np.float32).reshape(-1, dim_in)
                    if row.get("full") is not None else None)
            self.times.encoded(node_address(str(row.get("node") or ""), known), len(vecs),
                               float(row.get("encode_seconds") or 0.0))
            t0 = time.perf_counter()
            yield VectorBatch(np.asarray(row["ids"], dtype=np.int64), vecs,
                              json.loads(row["payloads"]),
                              [reject_from_json(r) for r in json.loads(row["rejects"])],
                              rows_done, source=paths[key[0]], reduced=True, full=full)
            self.times.wrote(driver, time.perf_counter() - t0)  # the builder's write of it


def _preflight(files: list[InputFile], spec: BuildSpec, ray_opts: RayOptions,
               say: Callable[[str], None], folder: Path) -> None:
    """Before any work on a joined cluster: every node sees the inputs, a custom encoder folder
    and, for a store that adopts segments (written on the workers), the index folder; there is
    room for one encoder actor (a bounded wait)."""
    paths = [f.spec.path for f in files]
    if spec.store and adopts_segments(spec.store):
        paths.append(str(Path(folder).resolve()))
    if not is_default_model(str(spec.encoder)) and Path(str(spec.encoder)).expanduser().is_dir():
        paths.append(str(Path(str(spec.encoder)).expanduser().resolve()))
    check_nodes_see(paths)
    wait_for_capacity(float(ray_opts.cpus_per_worker), float(ray_opts.gpus_per_worker),
                      capacity_wait() if ray_opts.capacity_wait is None else ray_opts.capacity_wait,
                      str(ray_opts.address), say)


def _dataset(folder: Path, manifest: Manifest, files: list[InputFile],
             committed: dict[int, set[int]], opts: Any, ray_opts: RayOptions,
             keys: np.ndarray | None, vectors: np.ndarray | None) -> Any:
    """The Ray Data pipeline: read the files' uncommitted blocks, encode and reduce them."""
    ray = require_ray()
    items = [{"file": f.index, "path": f.spec.path, "text_column": f.spec.text_column,
              "id_column": f.spec.id_column or "", "format": f.spec.format or ""} for f in files]
    skip = {k: sorted(v) for k, v in committed.items()}
    reducer_files = artifact_bytes(folder / REDUCER_DIR)
    # one document block per Ray block: by default Ray Data packs a file's small blocks into one
    # output block of up to 128 MiB, which reaches a single actor and leaves the other workers
    # idle (measured on 20k documents: 2 workers streamed no faster than 1)
    # (each dataset copies the context when created: the process-wide setting is restored after)
    ctx = ray.data.DataContext.get_current()
    saved_block_size, ctx.target_max_block_size = ctx.target_max_block_size, 1
    try:
        ds = (ray.data.from_items(items, override_num_blocks=len(items))
                .map_batches(read_blocks, fn_kwargs={"batch_size": opts.batch_size, "skip": skip},
                             batch_size=1, num_cpus=0)
                .map_batches(EncodeReduce, fn_constructor_kwargs={
                    "spec": BuildSpec.from_manifest(manifest).to_dict(),
                    "reducer_files": reducer_files,
                    "encode_batch": min(opts.batch_size, INGEST_ENCODE_BATCH), "cache_keys": keys,
                    "cache_vectors": vectors, "text_column": opts.text_column,
                    "threads": max(1, round(ray_opts.cpus_per_worker)),
                    "id_rule": manifest.id_rule, "keep_full": manifest.full is not None},
                    **_actor_args(ray_opts)))
        if adopts_segments(manifest.store):  # a task per segment, its graph built where it runs
            # no CPU reserved: where the encoder actors hold every CPU (one-CPU nodes, a local
            # runtime) a task that waits for one never starts while backpressure pauses the
            # actors (a 40,000-document run stalled so); at most `workers` at once instead
            ds = ds.map_batches(write_segment_blocks, fn_kwargs={"index_folder": str(folder)},
                                batch_size=max(1, int(ray_opts.segment_docs) // int(opts.batch_size)),
                                num_cpus=0, compute=ray.data.TaskPoolStrategy(size=int(ray_opts.workers)))
        return ds
    finally:
        ctx.target_max_block_size = saved_block_size
