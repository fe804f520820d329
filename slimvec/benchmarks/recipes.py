"""Index recipes of ``slimvec bench``: the product built and searched, in the one row schema.

For each recipe of ``index_recipes`` (a suite's ``[run]`` key, e.g.
``"pca:96|hnsw:M=16,ef=64|rescore=8,keep_full=float16"``) the dataset's corpus is written to an
``.npy`` (id = row) and built into an index folder by :func:`slimvec.migrate.migrate`, the path
users take; the folder is opened with ``slimvec.open`` and every figure comes from
``Index.search``: quality on the dataset's queries (each query's own row dropped, so ``k + 1``
results are asked for and the index re-ranks ``(k + 1) × R`` candidates, as a user asking for
``k + 1`` would), and single-query latency of the whole call (reducer, store, re-ranking).

A recipe is searched at its own depth (the index's default: ``rescore=R``, the depth
``rescore=auto`` calibrated, or none) and, when the index keeps full vectors, at every ``R`` of the
run's ``rescore`` list too. Rows have ``kind == "recipe"`` and ``store`` = the recipe; bytes are
split as the page reports them: ``index_bytes`` / ``bytes_per_vector`` the searchable index
without the full vectors (Qdrant Edge's ``full`` named vector taken out), ``full_bytes_per_vector``
the full vectors (side file or named vector), and ``extra["disk_bytes_per_vector"]`` the whole
folder. A calibrated recipe records ``extra["calibrated_depth"]`` and the recall calibration
measured on its corpus sample (``extra["calibrated_recall"]``).

This replaces ``scripts/bench_rescore.py`` (its own loop and row schema) and
``scripts/calibrate_growth.py``: ``benchmarks/suites/rescore-product.toml``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.benchmarks.datasets import BenchDataset
from slimvec.measure import time_single
from slimvec.planner.rows import Row, rerank_of
from slimvec.planner.sizing import RSS_CHILD_HELPERS

__all__ = ["measure_recipes", "recipe_rows", "serving_memory"]

log = logging.getLogger(__name__)

_RSS_CHILD = RSS_CHILD_HELPERS + r"""
import slimvec
import slimvec.index.folder  # noqa: F401  (sklearn, scipy and pandas come with the reducers)
from slimvec.connectors import faiss_store, hnsw_store, qdrant_edge as _qe  # noqa: F401
from slimvec.reducers import make_reducer

folder, qpath = sys.argv[1], sys.argv[2]
params = json.loads(sys.argv[3])
queries = np.load(qpath)
with open(folder + "/manifest.json") as fh:
    reducer = json.load(fh).get("reducer") or "none"
if reducer != "none":
    make_reducer(reducer)  # its module, imported before the baseline
base = rss()
before = rss()
idx = slimvec.open(folder)
for q in queries:
    idx.search(q[None, :], 10, **params)
after = rss()
print(json.dumps({"rss_delta": after - before, "files": mapped(folder), "baseline": base}))
"""


def _allocated(path: Path) -> int:
    from slimvec.persistence import allocated_bytes

    return int(allocated_bytes(path)) if path.exists() else 0


def _named_full_bytes(store_dir: Path) -> int:
    """Bytes of Qdrant Edge's ``full`` named vector (its storage and m=0 index folders)."""
    return sum(_allocated(p) for p in store_dir.rglob("*-full") if p.is_dir())


def measure_recipes(runner: Any, ds: BenchDataset, root: Path) -> list[Row]:
    """Rows of every ``index_recipes`` recipe on one dataset (see the module docstring).

    Parameters
    ----------
    runner : slimvec.benchmarks.runner._Runner
        Gives the config and records a recipe that fails in ``meta["skipped"]`` (not imported:
        the runner imports this module).
    ds : BenchDataset
    root : Path
        Work folder of the dataset.
    """
    cfg = runner.cfg
    source = root / "recipes-source.npy"
    np.save(source, np.ascontiguousarray(ds.corpus, dtype=np.float32), allow_pickle=False)
    rows: list[Row] = []
    try:
        for recipe in cfg.index_recipes:
            runner.progress(f"{ds.name}: index {recipe}", 0)
            folder = root / "recipe-index"
            try:
                rows += recipe_rows(cfg, ds, recipe, source, folder)
            except Exception as exc:  # noqa: BLE001 - recorded and reported, the run goes on
                runner._skip(ds, f"index recipe {recipe}", exc)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            runner.progress(None, 1)
    finally:
        source.unlink(missing_ok=True)
    return rows


def recipe_rows(cfg: Any, ds: BenchDataset, recipe: str, source: Path, folder: Path) -> list[Row]:
    """Build ``recipe`` from the corpus ``.npy`` ``source`` in ``folder`` and measure it with
    ``Index.search``: one row per depth searched."""
    from slimvec.index.folder import open_index
    from slimvec.migrate import MigrateOptions, migrate

    if folder.exists():
        shutil.rmtree(folder)
    t0 = time.perf_counter()
    migrate(str(source), folder, MigrateOptions(recipe=recipe, metric=ds.metric, progress=False,
                                                batch_size=2048))
    build_s = time.perf_counter() - t0
    n, k = len(ds.corpus), cfg.k
    named = _named_full_bytes(folder / "store")
    searchable = _allocated(folder / "store") - named
    facts = {"build_s": build_s, "index_bytes": searchable, "bytes_per_vector": searchable / max(n, 1),
             "reducer_bytes": _allocated(folder / "reducer")}
    full_bpv = (_allocated(folder / "full") + named) / max(n, 1)
    if cfg.measure_rss:  # the whole index opened by slimvec.open, the full vectors' page cache apart
        facts["serve_rss_bytes"] = serving_memory(folder, ds.queries[:200])["serving"]
    rows = []
    with open_index(folder) as idx:
        m = idx.manifest
        own = m.rescore.depth if m.rescore is not None else None
        depths: list[int | None] = [own] + ([R for R in cfg.rescore if R != own] if m.full is not None else [])
        for R in depths:
            def search(q: np.ndarray, R: int | None = R) -> np.ndarray:
                return np.asarray(idx.search(q, k + 1, rescore=R or 0).ids)

            row = Row(dataset=ds.name, encoder=ds.encoder, dim_in=ds.dim, reducer=m.reducer or "none",
                      dim_out=int(m.dim_out), store=recipe, kind="recipe", n_corpus=n,
                      n_queries=int(len(ds.queries)), k=k, rescore=R)
            row.reranked, row.rerank_depth = rerank_of(R, recipe)
            row.update(facts)
            row.full_bytes_per_vector = full_bpv if m.full is not None else None
            row.extra["disk_bytes_per_vector"] = _allocated(folder) / max(n, 1)
            if m.rescore is not None and m.rescore.calibrated:
                row.extra["calibrated_depth"] = int(m.rescore.depth)
                row.extra["calibrated_recall"] = m.rescore.recall
            row.update(ds.quality(search(ds.queries), k))
            row.update(time_single(lambda i: search(ds.queries[i:i + 1]), len(ds.queries),
                                   cfg.latency_queries, cfg.latency_repeats))
            t1 = time.perf_counter()
            search(ds.queries)
            row.qps = len(ds.queries) / max(time.perf_counter() - t1, 1e-9)
            rows.append(row)
            log.info("index %s at R=%s: recall %.4f, p50 %.3f ms", recipe, R, row.neighbor_recall_at_k,
                     row.latency_p50_ms)
    return rows


def serving_memory(folder: Path, queries: np.ndarray, params: dict[str, Any] | None = None,
                   timeout: float = 3600) -> dict[str, int]:
    """Memory of an index opened in a fresh process and searched one query at a time.

    Returns
    -------
    dict
        ``rss_delta`` (bytes of ``VmRSS`` gained by ``slimvec.open`` and the searches, the
        libraries already imported), ``full_resident`` (resident pages of the kept full vectors'
        memory-mapped file: clean page cache that re-ranking reads), ``serving`` (``rss_delta``
        minus ``full_resident``) and ``process_baseline`` (``VmRSS`` of the process with the
        libraries imported and no index open: the same for every configuration).
    """
    import tempfile

    from slimvec.errors import ConfigError

    folder = folder.resolve()
    with tempfile.TemporaryDirectory(prefix="slimvec-choice-rss-") as tmp:
        qpath = Path(tmp) / "queries.npy"
        np.save(qpath, np.ascontiguousarray(queries, dtype=np.float32), allow_pickle=False)
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        proc = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(folder), str(qpath),
                               json.dumps(params or {})], env=env, capture_output=True, text=True,
                              timeout=timeout)
    if proc.returncode != 0:
        raise ConfigError(f"Measuring the memory of {folder} failed: {proc.stderr.strip()[-400:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    full = sum(int(v) for p, v in data["files"].items()
               if Path(p).relative_to(folder).parts[:1] == ("full",))
    delta = int(data["rss_delta"])
    return {"rss_delta": delta, "full_resident": full, "serving": delta - full,
            "process_baseline": int(data["baseline"])}
