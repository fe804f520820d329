"""``slimvec ingest --engine ray``: Ray Data readers and encoder actors, one writer on the driver.

The run, in order:

1. the driver lists the input files (a file, a folder or a glob) and takes the writer lock;
2. new index: a reservoir sample over all files (the single-process draw), encoded by the actor
   pool, the reducer fitted once on the driver and saved (JSON + safetensors);
3. Ray Data reads every file in tasks (:class:`~slimvec.engines.actors.ReadBlocks`, the
   single-process parsers and bad-row rules) into blocks of ``batch_size`` rows, and an actor pool
   (:class:`~slimvec.engines.actors.EncodeReduce`; ``workers`` actors, ``gpus_per_worker`` GPUs
   each) encodes and reduces them, returning one 2-D array per block;
4. the driver is the only writer: it upserts each block by its deterministic ids, appends its
   rejects to the index's ``rejects.jsonl`` and commits through the shared commit loop. Each
   commit records the committed blocks ``(file, k)`` in the manifest.

At-least-once delivery: Ray restarts dead actors and retries their tasks, so a block may arrive
twice; the driver writes a block once per run (a set of the blocks seen) and upserts are by
deterministic id, so a block written again after a crash overwrites itself. A killed driver is
resumed by the same command: committed blocks are skipped (each input file is re-parsed to reach
its remaining blocks, which costs reading, not encoding), rejects.jsonl is cut back to the last
commit.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import numpy as np

from slimvec.engines.actors import EncodeReduce, artifact_bytes, read_blocks, sample_key
from slimvec.engines.blocks import InputFile, doc_to_json, expand_inputs, reject_from_json, sample_documents
from slimvec.engines.runtime import require_ray, start_ray
from slimvec.engines.writer_adapter import write_reduced
from slimvec.errors import ConfigError
from slimvec.indexer.encoder import DEFAULT_ENCODER, Encoder, resolve_model
from slimvec.indexer.index import (
    MANIFEST, REDUCER_DIR, read_manifest, reducer_checksum, store_checksums, store_folder,
    write_manifest,
)
from slimvec.indexer.locking import IndexLock
from slimvec.indexer.progress import fingerprint, truncate_file
from slimvec.indexer.train_pairs import fit_reducer
from slimvec.indexer.writer import REJECTS, IngestSummary, VectorBatch
from slimvec.reducers import make_reducer

__all__ = ["RayOptions", "ray_ingest"]

log = logging.getLogger(__name__)
DEFAULT_REDUCER, DEFAULT_STORE = "pca:96", "qdrant-edge"


@dataclass
class RayOptions:
    """How to run on Ray (mirrors ``--ray-address``, ``--workers``, ``--gpus-per-worker``).

    Parameters
    ----------
    address : str or None
        ``None`` starts a local runtime (loopback, no dashboard); ``auto`` / ``HOST:PORT`` joins
        a running cluster.
    workers : int
        Encoder actors.
    gpus_per_worker : float
        GPUs reserved per actor (0: CPU encoding).
    cpus_per_worker : float
        CPUs reserved per actor (also its torch threads, rounded).
    local_cpus : int or None
        CPUs of a local runtime (default: ``workers × cpus_per_worker``).
    """

    address: str | None = None
    workers: int = 2
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0
    local_cpus: int | None = None


def _encoder_name(spec: str) -> str:
    # Encoder.name depends on the spec only; the driver never loads the model
    return Encoder.name.fget(SimpleNamespace(spec=spec))  # type: ignore[attr-defined]


def _committed_from(progress: dict[str, Any]) -> dict[int, set[int]]:
    return {int(k): set(v) for k, v in (progress.get("committed") or {}).items()}


def _plan_resume(folder: Path, manifest: dict[str, Any], inputs: list[dict[str, Any]],
                 settings: dict[str, Any]) -> tuple[str, dict[int, set[int]]]:
    """``new`` (add to the index), ``resume`` (same unfinished run) or ``done``."""
    progress = manifest.get("progress") or {}
    same = (progress.get("engine") == "ray" and progress.get("inputs") == inputs
            and progress.get("settings") == settings)
    if same:
        return ("done" if progress.get("state") == "done" else "resume"), _committed_from(progress)
    if progress and progress.get("state") != "done":
        raise ConfigError(
            f"{folder} holds an unfinished ingest of {progress.get('input') or 'other input'} "
            f"({progress.get('engine', 'single-process')} engine, other files, columns or batch "
            "size). Rerun that command to finish it, or pass --rebuild to build the index anew.")
    return "new", {}


def _wipe(folder: Path) -> None:
    if (folder / MANIFEST).exists():
        (folder / MANIFEST).unlink()  # first: a crash mid-wipe leaves no half index
    for name in (REDUCER_DIR, "store", REJECTS, "full"):
        p = folder / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def _check_specs(folder: Path, manifest: dict[str, Any], opts: Any) -> None:
    from slimvec.connectors import canonical_store_spec

    diffs = []
    if opts.reducer and manifest.get("reducer") not in (opts.reducer, make_reducer(opts.reducer).spec):
        diffs.append(f"reducer {manifest.get('reducer')!r} (asked {opts.reducer!r})")
    if opts.store and manifest.get("store") != canonical_store_spec(opts.store):
        diffs.append(f"store {manifest.get('store')!r} (asked {opts.store!r})")
    if opts.encoder and manifest.get("encoder") != opts.encoder:
        diffs.append(f"encoder {manifest.get('encoder')!r} (asked {opts.encoder!r})")
    if diffs:
        raise ConfigError(f"{folder} already holds an index built with {', '.join(diffs)}. Use the "
                          "same specs, another --index folder, or --rebuild.")


def _actor_args(ray_opts: RayOptions) -> dict[str, Any]:
    ray = require_ray()
    return {"compute": ray.data.ActorPoolStrategy(size=int(ray_opts.workers)), "batch_size": 1,
            "num_cpus": float(ray_opts.cpus_per_worker),
            "num_gpus": float(ray_opts.gpus_per_worker) or None,
            "max_restarts": -1, "max_task_retries": -1}


def _encode_sample(sample: list[tuple[int, Any]], encoder: str, batch_size: int,
                   ray_opts: RayOptions, text_column: str) -> np.ndarray:
    """Encode the fit sample on the actor pool, chunked as the single-process ingest chunks it."""
    ray = require_ray()
    chunks = [{"file": 0, "block": k, "rows": 0, "path": "", "rejects": "[]",
               "docs": json.dumps([doc_to_json(d) for _, d in sample[i:i + batch_size]],
                                  ensure_ascii=False)}
              for k, i in enumerate(range(0, len(sample), batch_size))]
    ds = ray.data.from_items(chunks, override_num_blocks=len(chunks)).map_batches(
        EncodeReduce, fn_constructor_kwargs={"encoder": encoder, "reducer_files": None,
                                             "encode_batch": min(batch_size, 128),
                                             "text_column": text_column,
                                             "threads": max(1, round(ray_opts.cpus_per_worker))},
        **_actor_args(ray_opts))
    parts = {int(r["block"]): np.asarray(r["vectors"], dtype=np.float32) for r in ds.iter_rows()}
    return np.concatenate([parts[k] for k in range(len(chunks))])


def _new_index(folder: Path, files: list[InputFile], opts: Any, ray_opts: RayOptions,
               summary: IngestSummary) -> tuple[dict[str, Any], Any, np.ndarray, np.ndarray]:
    sample, _rows = sample_documents(files, opts.fit_sample, opts.seed)
    if not sample:
        raise ConfigError(f"{files[0].spec.path} and the other inputs hold no ingestible document: "
                          "nothing to fit the reducer on (check --text-column).")
    X = _encode_sample(sample, opts.encoder, opts.batch_size, ray_opts, opts.text_column)
    reducer = make_reducer(opts.reducer)
    t0 = time.perf_counter()
    fit_reducer(reducer, X, None, None, opts.batch_size)
    summary.fit_seconds = time.perf_counter() - t0
    folder.mkdir(parents=True, exist_ok=True)
    reducer.save(folder / REDUCER_DIR)
    manifest = {
        "encoder": opts.encoder, "encoder_name": _encoder_name(opts.encoder), "dim_in": int(X.shape[1]),
        "reducer": reducer.spec, "dim_out": int(reducer.n_components_), "store": opts.store,
        "metric": "cosine", "count": 0,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "text_column": opts.text_column, "id_column": opts.id_column,
        "sha256": {f"{REDUCER_DIR}/config.json": reducer_checksum(folder)},
    }
    keys = np.array([sample_key(fi, d.row) for fi, d in sample], dtype=np.int64)
    return manifest, reducer, keys, X


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
        The single-process options (``keep_full`` and ``train_pairs`` are not supported here).
    ray_opts : RayOptions

    Raises
    ------
    MissingDependencyError
        Ray Data is not installed.
    ConfigError
        Bad input or options, another unfinished ingest in the folder, a bad row under ``strict``.
    """
    from slimvec.connectors import canonical_store_spec, make_store

    ray_opts = ray_opts or RayOptions()
    say = notify or log.info
    require_ray()
    if options.keep_full or options.train_pairs:
        raise ConfigError("--keep-full and --train-pairs are not supported with --engine ray yet; "
                          "ingest in one process for them.")
    if ray_opts.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {ray_opts.workers}.")
    files = expand_inputs(str(input_path), options.text_column, options.id_column, options.format)
    folder = Path(index_dir)
    inputs = [{"path": f.spec.path, "fingerprint": fingerprint(f.spec.path)} for f in files]
    settings = {"text_column": options.text_column, "id_column": options.id_column,
                "format": options.format, "batch_size": int(options.batch_size)}
    with IndexLock(folder, exclusive=True):
        if options.rebuild:
            _wipe(folder)
        started = start_ray(ray_opts.address,
                            ray_opts.local_cpus or max(1, round(ray_opts.workers * ray_opts.cpus_per_worker)))
        try:
            return _run(folder, files, inputs, settings, options, ray_opts, say,
                        canonical_store_spec, make_store)
        finally:
            if started:
                require_ray().shutdown()


def _run(folder: Path, files: list[InputFile], inputs: list[dict[str, Any]],
         settings: dict[str, Any], opts: Any, ray_opts: RayOptions, say: Callable[[str], None],
         canonical_store_spec: Any, make_store: Any) -> IngestSummary:
    from slimvec.reducers import load_reducer

    ray = require_ray()
    summary = IngestSummary(index=str(folder), input=", ".join(f.spec.path for f in files))
    t_start = time.perf_counter()
    keys = vectors = None
    if (folder / MANIFEST).exists():
        manifest = read_manifest(folder)
        _check_specs(folder, manifest, opts)
        mode, committed = _plan_resume(folder, manifest, inputs, settings)
        if mode == "done":
            summary.already_done, summary.count = True, int(manifest.get("count", 0))
            say(f"{summary.input} was already ingested completely into {folder}; nothing to do. "
                "Pass --rebuild to build the index anew.")
            return summary
        reducer = load_reducer(folder / REDUCER_DIR)
        store = make_store(manifest["store"], store_folder(folder)).open()
        encoder = manifest["encoder"]
        if mode == "resume":
            truncate_file(folder / REJECTS, manifest["progress"].get("rejects_bytes"))
            summary.resumed_from = int(manifest["progress"].get("next_row", 0))
            say(f"resuming: {sum(map(len, committed.values())):,} committed block(s) of "
                f"{len(files)} file(s) are skipped")
    else:
        resolve_model(opts.encoder or DEFAULT_ENCODER)  # fail fast on a bad encoder spec
        from dataclasses import replace

        opts = replace(opts, reducer=opts.reducer or DEFAULT_REDUCER,
                       store=canonical_store_spec(opts.store or DEFAULT_STORE),
                       encoder=opts.encoder or DEFAULT_ENCODER)
        make_reducer(opts.reducer)
        manifest, reducer, keys, vectors = _new_index(folder, files, opts, ray_opts, summary)
        store = make_store(opts.store, store_folder(folder))
        store.create(int(reducer.n_components_), "cosine")
        summary.created, committed, encoder = True, {}, opts.encoder
    rejects_path = folder / REJECTS
    manifest["progress"] = {
        "engine": "ray", "inputs": inputs, "settings": settings, "state": "running",
        "committed": {str(k): sorted(v) for k, v in committed.items()},
        "next_row": int((manifest.get("progress") or {}).get("next_row", 0)) if committed else 0,
        "rejects_bytes": rejects_path.stat().st_size if rejects_path.exists() else 0,
        "workers": ray_opts.workers, "gpus_per_worker": ray_opts.gpus_per_worker,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    manifest.pop("store_sha256", None)
    write_manifest(folder, manifest)

    items = [{"file": f.index, "path": f.spec.path, "text_column": f.spec.text_column,
              "id_column": f.spec.id_column or "", "format": f.spec.format or ""} for f in files]
    skip = {k: sorted(v) for k, v in committed.items()}
    reducer_files = artifact_bytes(folder / REDUCER_DIR)
    ds = (ray.data.from_items(items, override_num_blocks=len(items))
          .map_batches(read_blocks, fn_kwargs={"batch_size": opts.batch_size, "skip": skip},
                       batch_size=1, num_cpus=0)
          .map_batches(EncodeReduce, fn_constructor_kwargs={
              "encoder": encoder, "reducer_files": reducer_files,
              "encode_batch": min(opts.batch_size, 128), "cache_keys": keys, "cache_vectors": vectors,
              "text_column": opts.text_column, "threads": max(1, round(ray_opts.cpus_per_worker))},
              **_actor_args(ray_opts)))
    written: list[tuple[int, int]] = []
    seen = {(f, b) for f, blocks in committed.items() for b in blocks}
    rows_done = int(manifest["progress"]["next_row"])
    paths = {f.index: f.spec.path for f in files}

    def batches() -> Iterator[VectorBatch]:
        nonlocal rows_done
        for row in ds.iter_rows():
            key = (int(row["file"]), int(row["block"]))
            if key in seen:  # a retried task delivered a block again
                log.debug("block %s delivered twice; written once", key)
                continue
            seen.add(key)
            written.append(key)
            rows_done += int(row["rows"])
            vecs = np.asarray(row["vectors"], dtype=np.float32).reshape(-1, int(reducer.n_components_))
            yield VectorBatch(np.asarray(row["ids"], dtype=np.int64), vecs, json.loads(row["payloads"]),
                              [reject_from_json(r) for r in json.loads(row["rejects"])], rows_done,
                              source=paths[key[0]])

    def on_commit() -> None:  # after the store flushed, before the manifest records progress
        for f, b in written:
            committed.setdefault(f, set()).add(b)
        written.clear()
        manifest["progress"]["committed"] = {str(k): sorted(v) for k, v in committed.items()}

    t_stream = time.perf_counter()
    write_reduced(folder, manifest, store, int(reducer.n_components_), batches(), summary,
                  opts.checkpoint_seconds, opts.checkpoint_batches, opts.strict, on_commit)
    if not summary.interrupted:
        sums = store_checksums(folder, manifest)
        if sums:
            manifest["store_sha256"] = sums
            write_manifest(folder, manifest)
    summary.seconds = time.perf_counter() - t_stream
    summary.total_seconds = time.perf_counter() - t_start
    log.info("ray engine: %d documents (%d rejected) into %s in %.1fs", summary.ingested,
             summary.rejected, folder, summary.total_seconds)
    return summary
