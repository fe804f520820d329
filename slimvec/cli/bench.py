"""``slimvec bench``: reducers × stores × peer baselines on your data, one run, one report."""

from __future__ import annotations

import logging
import shlex
import sys
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress

from slimvec.cli.checks import int_range, number_range
from slimvec.errors import ConfigError

__all__ = ["bench"]

log = logging.getLogger(__name__)


def _progress(console: Console) -> Progress:
    from slimvec.ui import make_progress  # rich bar on a terminal, plain lines in a log

    return make_progress(unit="steps", console=console)


def bench(
    out: Path | None = typer.Option(None, "--out", help="Folder for results.json and report.md (required unless the --suite names one)."),
    suite: Path | None = typer.Option(None, "--suite", help="TOML suite file listing data, reducers, stores and options (see benchmarks/suites/); replaces the data and run options."),
    pairs: list[Path] = typer.Option([], "--pairs", help="sentence1<TAB>sentence2<TAB>score file (repeatable): the corpus is their unique sentences."),
    train_pairs: list[Path] = typer.Option([], "--train-pairs", help="Pairs file whose positive pairs train pair-learning reducers such as mcr2 (repeatable); evaluation pairs never reach fit."),
    vectors: Path | None = typer.Option(None, "--vectors", help="Precomputed corpus vectors: .npy (id = row) or Parquet with an id column."),
    queries: Path | None = typer.Option(None, "--queries", help="Query vectors for --vectors [default: a sample of the corpus, each excluded from its own results]."),
    dataset: list[Path] = typer.Option([], "--dataset", help="ann-benchmarks .hdf5 file or VectorDBBench folder (train/test/neighbors) (repeatable)."),
    encoder: list[str] = typer.Option([], "--encoder", help="Encoder for --pairs: 'minilm' (packaged) or a local model folder, e.g. a `slimvec prune` output (repeatable) [default: minilm]."),
    reducer: list[str] = typer.Option([], "--reducer", help="Reducer spec (repeatable), e.g. pca:96; 'none' (full dimension) is always measured."),
    store: list[str] = typer.Option([], "--store", help="Store spec (repeatable): hnsw, faiss[:FACTORY], qdrant-edge[:quant=sq8], qdrant:... [default: hnsw]."),
    rescore: list[int] = typer.Option([], "--rescore", callback=int_range(1), help="Also measure each reduced row with k x R candidates re-ranked by the full vectors (repeatable R)."),
    recipe: list[str] = typer.Option([], "--recipe", help="A recipe string or tuned.json (repeatable; docs/recipes.md): adds its reducer, store and rescoring depth to the grid (rescore=auto: R in 2, 4, 8, 16, 32, the depths calibration tries)."),
    kmeans: int | None = typer.Option(None, "--kmeans", callback=int_range(1), help="Cluster-routed retrieval rows with FAISS k-means of K clusters on each reducer's output (and the reducer's own clusters)."),
    route_probes: list[int] = typer.Option([], "--route-probes", callback=int_range(1), help="Clusters a query is routed to (repeatable) [default: 1 and 4]."),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="Measure the peer quantization baselines (FAISS SQ8/PQ/OPQ, Qdrant Edge SQ/BQ/TurboQuant, sentence-transformers int8/binary)."),
    k: int = typer.Option(10, "--k", callback=int_range(1), help="Results per query: the k of neighbour/task recall@k and MRR@k."),
    dup_threshold: float = typer.Option(4.0, "--dup-threshold", callback=number_range(), help="Pairs scoring at least this are duplicates (task recall)."),
    skip_bad_rows: bool = typer.Option(False, "--skip-bad-rows", help="Skip and count malformed pair rows instead of failing."),
    sts_file: str | None = typer.Option(None, "--sts-file", help="Which --pairs file gives the headline STS Spearman [default: the first *sts*test* file]."),
    metric: str = typer.Option("cosine", "--metric", help="Metric of --vectors data: cosine or l2."),
    max_queries: int = typer.Option(2000, "--max-queries", callback=int_range(1), help="Queries per dataset at most."),
    latency_queries: int = typer.Option(200, "--latency-queries", callback=int_range(1), help="Single queries timed for the latency percentiles."),
    fit_on: str = typer.Option("corpus", "--fit-on", help="What unsupervised reducers fit on: 'corpus' (a sample of the data searched) or 'train' (the --train-pairs sentences only)."),
    threads: int = typer.Option(1, "--threads", callback=int_range(1), help="Threads for FAISS and torch (1: single-thread latency)."),
    fit_max: int = typer.Option(20000, "--fit-max", callback=int_range(2), help="Corpus rows an unsupervised reducer is fitted on at most."),
    cache: Path | None = typer.Option(None, "--cache", help="Encoding cache folder [default: $SLIMVEC_CACHE/encodings or ~/.cache/slimvec/encodings]."),
    work: Path | None = typer.Option(None, "--work", help="Where indexes are built [default: a temporary folder]."),
    keep_indexes: bool = typer.Option(False, "--keep-indexes", help="Keep the built indexes in --work."),
    seed: int = typer.Option(0, "--seed", callback=int_range(0), help="Seed of query sampling, fit sampling and k-means."),
    index: Path | None = typer.Option(None, "--index", help="Only time single queries of this existing index through Index.search, from texts and from vectors (distinct sentences of the bundled STS-B test split; the demo's figure); with --out, also write index-latency.json there."),
) -> None:
    """Measure reducers × stores beside quantization baselines; write results.json and report.md.

    Rows: one per dataset × reducer × store (× rescore R): index bytes on disk, bytes/vector,
    neighbour recall@k against exact full-dimension search, task recall/MRR@k on duplicate pairs,
    STS Spearman, single-query latency p50/p95/p99, QPS, fit and transform cost.
    With --suite FILE the data and run options come from a TOML suite (see benchmarks/suites/).
    """
    from slimvec.benchmarks.inputs import BenchInputs, bench_to_folder
    from slimvec.benchmarks.runner import BenchConfig
    from slimvec.cli.checks import check_bench_inputs
    from slimvec.recipe import recipe_grid

    if index is not None:  # an existing index, timed as users search it
        _time_index(index, latency_queries, k, out)
        return
    check_bench_inputs(vectors)  # a .hdf5 / folder given to --vectors belongs to --dataset
    console = Console(stderr=True)
    command = "slimvec " + shlex.join(sys.argv[1:])
    extra_meta: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="slimvec-bench-") as tmp:
        work_dir = work or Path(tmp)
        if suite is not None:
            from slimvec.benchmarks.suite import load_suite

            given = [name for name, value in (("--pairs", pairs), ("--vectors", vectors), ("--dataset", dataset),
                                              ("--reducer", reducer), ("--store", store), ("--rescore", rescore),
                                              ("--recipe", recipe))
                     if value]
            if given:
                raise ConfigError(f"--suite {suite} declares the data and the run; remove {', '.join(given)} "
                                  "(or edit the suite file).")
            loaded = load_suite(suite)
            inputs = loaded.inputs
            if cache is not None:
                inputs.cache = cache
            config = loaded.config(work_dir, keep_indexes)
            out = out or loaded.out
            if out is None:
                raise ConfigError(f"Suite {suite} names no 'out' folder: pass --out DIR.")
            extra_meta = {"suite": str(suite), "suite_description": loaded.description}
        else:
            if out is None:
                raise ConfigError("Missing --out DIR: the folder for results.json and report.md.")
            reducer, store, rescore = recipe_grid(recipe, reducer, store, rescore)
            inputs = BenchInputs(pairs=pairs, train_pairs=train_pairs, vectors=vectors, queries=queries,
                                 datasets=dataset, encoders=encoder, dup_threshold=dup_threshold,
                                 skip_bad_rows=skip_bad_rows, sts_file=sts_file, metric=metric,
                                 max_queries=max_queries, cache=cache, seed=seed)
            config = BenchConfig(reducers=reducer, stores=store, work_dir=work_dir, baselines=baselines,
                                 rescore=rescore, kmeans=kmeans, route_probes=route_probes or [1, 4], k=k,
                                 latency_queries=latency_queries, threads=threads, fit_max=fit_max,
                                 fit_on=fit_on, keep_indexes=keep_indexes, seed=seed)
        inputs.validate()
        config.validate()  # an unknown spec fails before any encoding
        with _progress(console) as bar:
            encode_task = bar.add_task("encoding (cached texts are skipped)", total=None) if inputs.pairs else None
            bench_task = None

            def on_encode(n: int) -> None:
                if encode_task is not None:
                    bar.update(encode_task, advance=n)

            def on_datasets(datasets: list) -> None:
                nonlocal bench_task
                for ds in datasets:
                    console.print(f"dataset [bold]{ds.name}[/]: {len(ds.corpus):,} vectors of {ds.dim} dims, "
                                  f"{len(ds.queries):,} queries, {len(ds.task_query):,} task queries")
                bench_task = bar.add_task("bench", total=config.n_steps(len(datasets)))

            def step(description: str | None, done: int) -> None:
                if bench_task is None:
                    return
                if description is not None:
                    bar.update(bench_task, description=description)
                if done:
                    bar.advance(bench_task, done)

            rows, meta, results = bench_to_folder(inputs, config, out, progress=step, on_encode=on_encode,
                                                  on_datasets=on_datasets, command=command,
                                                  extra_meta=extra_meta)
    from slimvec.ui import faiss_warning_count

    console.print(f"{len(rows)} rows in {results}; report {Path(out) / 'report.md'}"
                  + (f"; {len(meta['skipped'])} configuration(s) skipped (see the report's notes)"
                     if meta["skipped"] else "")
                  + f"; {meta.get('wall_s', 0):,.1f} s wall", markup=False)
    warned = faiss_warning_count()
    if warned:
        console.print(f"FAISS: {warned:,} clustering warning(s) not shown (IVF / PQ / k-means "
                      "trained on fewer than 39 points per centroid, as small corpora are; "
                      "their rows are measured as trained)", markup=False)


def _time_index(index: Path, n: int, k: int, out: Path | None) -> None:
    """``slimvec bench --index DIR``: print (and with ``--out`` write) its Index.search latency."""
    import json

    from slimvec.benchmarks.index_latency import index_latency, render_index_latency

    result = index_latency(index, n=n, k=k, progress=True)
    for line in render_index_latency(result):
        typer.echo(line)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "index-latency.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
