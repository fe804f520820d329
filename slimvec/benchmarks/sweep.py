"""A quick sweep: ``slimvec bench`` on the first rows of the user's data, for ``slimvec plan``.

It runs the harness (:func:`slimvec.benchmarks.inputs.bench_to_folder`), so it sits above both the
harness and the planner: in plan.py it made ``plan -> inputs -> html -> plan`` a cycle (issue 24
item 7), since the report page draws the planner.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import ConfigError
from slimvec.planner.rows import Row

__all__ = ["quick_sweep", "corpus_sweep"]

log = logging.getLogger(__name__)


def _sample_pairs(path: Path, limit: int, out: Path) -> Path:
    target = out / path.name
    with open(path, encoding="utf-8") as src, open(target, "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i > limit:
                break
            dst.write(line)
    return target


def _sample_vectors(path: Path, limit: int, out: Path) -> Path:
    if path.suffix.lower() != ".npy":
        return path  # Parquet / HDF5: handed to bench as is
    arr = np.load(path, mmap_mode="r", allow_pickle=False)
    target = out / path.name
    np.save(target, np.asarray(arr[:limit]), allow_pickle=False)
    return target


def quick_sweep(out_dir: str | Path, *, pairs: Sequence[str | Path] = (), vectors: str | Path | None = None,
                reducers: Sequence[str] = (), stores: Sequence[str] = (), sample: int = 2000,
                latency_queries: int = 200, baselines: bool = True,
                timeout_s: float | None = None, rescore: Sequence[int] = (),
                index_recipes: Sequence[str] = ()) -> list[Row]:
    """Run the benchmark harness on the first ``sample`` rows of the user's data; returns its rows.

    The sweep is :func:`slimvec.benchmarks.inputs.bench_to_folder` (what ``slimvec bench`` runs),
    called in this process, so its rows are the same as a full ``slimvec bench`` run on the sample
    and ``out_dir`` holds its ``results.json`` and ``report.md``.

    ``timeout_s`` is accepted for compatibility and ignored (the sweep no longer runs a subprocess
    that could be timed out); it is deprecated.

    Raises
    ------
    ConfigError
        No data given, or a bad reducer/store spec or data file (validated before any encoding).
    """
    from slimvec.benchmarks.inputs import BenchInputs, bench_to_folder

    if timeout_s is not None:
        import warnings

        warnings.warn("quick_sweep(timeout_s=...) is ignored: the sweep runs in-process now.",
                      DeprecationWarning, stacklevel=2)
    from slimvec.benchmarks.runner import BenchConfig

    if not pairs and vectors is None:
        raise ConfigError("A quick sweep needs --pairs FILE (repeatable) or --vectors FILE.")
    out = Path(out_dir)
    config = BenchConfig(reducers=list(reducers), stores=list(stores), work_dir=out / "work",
                         baselines=baselines, latency_queries=latency_queries, rescore=list(rescore),
                         index_recipes=list(index_recipes))
    config.validate()  # a typo fails before the sample is written or encoded
    sample_dir = out / "sample"
    sample_dir.mkdir(parents=True, exist_ok=True)
    inputs = BenchInputs(pairs=[_sample_pairs(Path(p), sample, sample_dir) for p in pairs],
                         vectors=_sample_vectors(Path(vectors), sample, sample_dir) if vectors is not None else None)
    log.info("quick sweep: %d reducer(s) × %d store(s) on the first %d rows", len(config.reducers),
             len(config.stores), sample)
    with tempfile.TemporaryDirectory(prefix="slimvec-sweep-") as tmp:
        config.work_dir = Path(tmp)
        rows, _, _ = bench_to_folder(inputs, config, out, command=_sweep_command(inputs, config))
    return rows


def corpus_sweep(out_dir: str | Path, corpus: str | Path, recipes: Sequence[Any], *, sample: int = 2000,
                 text_column: str = "text", sizes: int = 3) -> list[Row]:
    """The ``recipes`` built and searched as users search them (``Index.search``, the bench's
    ``index_recipes`` rows) on the first ``sample`` texts of the user's ``corpus``, encoded here,
    at ``sizes`` prefixes (``sample / 4``, ``sample / 2``, ``sample``): rows of one dataset family
    measured at several sizes, which :mod:`slimvec.planner.growth` fits and checks.

    The latencies of one recipe's sizes are then taken side by side (:func:`_time_sizes`), not one
    size after another: the growth fit extrapolates the slope between them, and a size timed alone
    (the first one of a process, or one caught by a load spike) bent it by a third or more."""
    from slimvec.encoder import Encoder
    from slimvec.planner.corpus import read_corpus

    texts, _ = read_corpus(corpus, sample, text_column)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vectors = Encoder().encode(texts)
    rows: list[Row] = []
    for n in sorted({max(len(texts) >> i, 1) for i in range(sizes)}):
        path = out / f"corpus-{n}.npy"
        np.save(path, np.asarray(vectors[:n], dtype=np.float32), allow_pickle=False)
        rows += quick_sweep(out / f"at-{n}", vectors=path, sample=n, baselines=False,
                            index_recipes=[str(r) for r in recipes])
    for recipe in recipes:
        _time_sizes(out / "timed", str(recipe), vectors, [r for r in rows if r.store == str(recipe)])
    return rows


def _time_sizes(work: Path, recipe: str, vectors: np.ndarray, rows: list[Row], queries: int = 200,
                repeats: int = 3) -> None:
    """Re-time ``rows`` (one ``recipe`` at several ``n_corpus``) with every size built and open at
    once, each query timed on each size in turn (:func:`slimvec.measure.time_alternating`), so
    warm-up and load fall on all sizes alike. The queries are the sample's first ``queries``
    vectors (in every prefix), searched as :func:`slimvec.benchmarks.recipes.recipe_rows` does."""
    import shutil

    from slimvec.index.folder import open_index
    from slimvec.measure import time_alternating
    from slimvec.migrate import MigrateOptions, migrate

    sizes = sorted({int(r.n_corpus) for r in rows if r.n_corpus})
    if len(sizes) < 2:
        return
    q = np.ascontiguousarray(vectors[:queries], dtype=np.float32)
    opened = []
    try:
        for n in sizes:
            src, folder = work / f"corpus-{n}.npy", work / f"index-{n}"
            work.mkdir(parents=True, exist_ok=True)
            np.save(src, np.asarray(vectors[:n], dtype=np.float32), allow_pickle=False)
            migrate(str(src), folder, MigrateOptions(recipe=recipe, metric="cosine", progress=False,
                                                     batch_size=2048))
            opened.append(open_index(folder))
        k = int(rows[0].k or 10) + 1
        searches = [lambda i, idx=idx: idx.search(q[i:i + 1], k) for idx in opened]
        for n, summary in zip(sizes, time_alternating(searches, len(q), queries, repeats)):
            for r in rows:
                if r.n_corpus == n:  # the sweep's one row per size (the recipe's own depth)
                    r.update(summary)
            log.info("%s at n = %d, timed beside the other sizes: p50 %.3f ms", recipe, n,
                     summary["latency_p50_ms"])
    finally:
        for idx in opened:
            idx.close()
        shutil.rmtree(work, ignore_errors=True)


def _sweep_command(inputs: Any, config: Any) -> str:
    """The ``slimvec bench`` command equivalent to a quick sweep (recorded in its results)."""
    import shlex

    parts = ["slimvec", "bench", "--out", "OUT"]
    for p in inputs.pairs:
        parts += ["--pairs", str(p)]
    if inputs.vectors is not None:
        parts += ["--vectors", str(inputs.vectors)]
    for r in config.reducers[1:]:
        parts += ["--reducer", r]
    for st in config.stores:
        parts += ["--store", st]
    for R in config.rescore:
        parts += ["--rescore", str(R)]
    if not config.baselines:
        parts.append("--no-baselines")
    return shlex.join(parts)
