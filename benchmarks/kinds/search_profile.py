"""Where the default recipe's single-query search spends its time, and before / after a change
(issue 28 item 4).

Builds (once, cached in ``--work``) two indexes from the first ``--n`` rows of a ``.npy`` of real
sentence vectors through the library's array path (``slimvec.migrate.migrate``): the default
recipe (``pca:96|qdrant-edge|rescore=auto,keep_full=float16``, depth calibrated by the build) and
``none|hnsw`` (full-precision HNSW, the reference). Then, one query at a time, one thread:

- ``--pool``: the store's fetch of ``k x R`` candidates on two copies of the shard, the engine's
  default search pool against one search thread (``search_threads=1``);
- ``--breakdown``: p50 of each stage of ``Index.search`` (reduce, store fetch of ``k x R``
  candidates, re-rank from the float16 side file) and a cProfile of 300 searches;
- ``--python``: per query, the time of ``Index.search`` outside FAISS's native calls (the
  Python around them: checks, the planner, the id map, the filter test) on the default recipe
  with the filtered suite's ``bucket`` payload, unfiltered and at 50 / 10 / 1 / 0.1 % (issue 51);
- ``--scan-before COMMIT``: the exact scan of a filtered search at ``COMMIT`` against today's,
  alternated on the same index (issue 51 item 1);
- the comparison (default): p50 and neighbour recall@10 (against exact search on the full
  vectors) of ``Index.search`` on the default recipe, of ``none|hnsw``, and of the *before* path:
  the store and full-vector modules of ``--before`` (a git commit) loaded beside today's in this
  process, searching the same open shard and side file. The machine is shared, so the rounds
  alternate (before, after, hnsw; twice) and the report gives ratios of p50s taken in the same
  round.

``--before-index`` is the same recipe built from the same ``corpus-N.npy`` by the *before*
commit's code (its shard settings and its calibrated depth are part of what changed): check that
commit out elsewhere and run ``slimvec migrate WORK/corpus-20000.npy DIR --recipe "pca:96|qdrant-edge|rescore=auto,keep_full=float16"``
there.

Usage::

    OMP_NUM_THREADS=1 python -m benchmarks search-profile --data bench-data/realtext-minilm-100k.npy \
        --queries bench-data/realtext-minilm-queries.npy --n 20000 --before 6147bc7 \
        --before-index /tmp/before-20000 --out docs/benchmarks/search-latency.json
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import json
import logging
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the checkout
DEFAULT = "pca:96|qdrant-edge|rescore=auto,keep_full=float16"
REFERENCE = "none|hnsw"
log = logging.getLogger("search_profile")


def build(data: Path, n: int, work: Path) -> dict[str, Path]:
    """The two indexes over the first ``n`` rows of ``data`` (reused when already built)."""
    from slimvec.migrate import MigrateOptions, migrate

    work.mkdir(parents=True, exist_ok=True)
    prefix = work / f"corpus-{n}.npy"
    if not prefix.exists():
        np.save(prefix, np.ascontiguousarray(np.load(data, mmap_mode="r")[:n], dtype=np.float32))
    out = {}
    for name, recipe in (("default", DEFAULT), ("hnsw", REFERENCE)):
        folder = work / f"{name}-{n}"
        if not (folder / "manifest.json").exists():
            t0 = time.perf_counter()
            migrate(str(prefix), folder, MigrateOptions(recipe=recipe, progress=False))
            log.info("built %s (%s) in %.0f s", folder, recipe, time.perf_counter() - t0)
        out[name] = folder
    return out


def truth_of(corpus: np.ndarray, queries: np.ndarray, k: int = 10) -> np.ndarray:
    """Exact cosine top ``k`` row numbers (a ``.npy`` source's ids are its row numbers)."""
    x = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    out = np.empty((len(q), k), dtype=np.int64)
    for lo in range(0, len(q), 256):
        s = q[lo:lo + 256] @ x.T
        top = np.argpartition(-s, k - 1, axis=1)[:, :k]
        out[lo:lo + 256] = top
    return out


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f.tolist()) & set(t.tolist())) / truth.shape[1]
                          for f, t in zip(found, truth)]))


def timed(search: Callable[[np.ndarray], np.ndarray], queries: np.ndarray) -> tuple[float, np.ndarray]:
    """p50 (ms) of one-query searches and the ids found."""
    search(queries[:20])
    times, found = [], []
    for q in queries:
        t0 = time.perf_counter()
        ids = search(q[None, :])
        times.append(time.perf_counter() - t0)
        found.append(ids[0])
    return float(np.median(times) * 1000), np.array(found)


def before_modules(commit: str) -> tuple[Any, Any]:
    """``qdrant_edge`` and ``fullvectors`` as they were at ``commit``, loaded beside today's."""
    mods = []
    for rel, name in (("slimvec/connectors/qdrant_edge.py", "_before_qdrant_edge"),
                      ("slimvec/connectors/fullvectors.py", "_before_fullvectors")):
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{rel}"], check=True,
                             capture_output=True, text=True).stdout
        path = Path(tempfile.mkdtemp()) / f"{name}.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods[0], mods[1]


def before_search(idx: Any, commit: str, depth: int | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """``Index.search`` of the default recipe with ``commit``'s store search and re-ranking, at
    ``depth`` (default: the index's calibrated one; give what ``commit``'s calibration chose)."""
    qe, fv = before_modules(commit)
    store = qe.QdrantEdgeStore(idx.store.location)
    store.dim, store.metric, store.options = idx.store.dim, idx.store.metric, dict(idx.store.options)
    store._shard = idx.store._shard  # the same open shard: one engine per folder and process
    full = fv.FullVectors.open(idx.folder / idx.manifest.full.dir)
    depth, reducer = int(depth or idx.manifest.rescore.depth), idx.reducer
    to_query = getattr(reducer, "transform_query", reducer.transform)

    def search(q: np.ndarray) -> np.ndarray:
        cands = store.search(to_query(q), 10 * depth)
        return full.rerank(q, cands, 10).ids
    return search


def pool_comparison(idx: Any, queries: np.ndarray) -> None:
    """``store.search`` of ``k x R`` candidates on two copies of the index's shard, one with the
    engine's default search pool (a thread per CPU) and one with one search thread, in random
    order per query: p50, mean and whether they found the same ids."""
    from slimvec.connectors import make_store

    depth = int(idx.manifest.rescore.depth)
    reduced = getattr(idx.reducer, "transform_query", idx.reducer.transform)(queries)
    stores, tmp = {}, Path(tempfile.mkdtemp())
    for name, threads in (("engine pool", None), ("1 search thread", 1)):
        folder = tmp / name.replace(" ", "-")
        shutil.copytree(idx.store._folder(idx.store.location), folder)
        cfg = folder / "shard" / "edge_config.json"
        edge = json.loads(cfg.read_text())
        edge.pop("max_search_threads", None)
        if threads:
            edge["max_search_threads"] = threads
        cfg.write_text(json.dumps(edge))
        stores[name] = make_store("qdrant-edge", folder).open()
    times: dict[str, list[float]] = {k: [] for k in stores}
    found: dict[str, list[np.ndarray]] = {k: [] for k in stores}
    rng = np.random.default_rng(0)
    for q in reduced:
        for name in rng.permutation(list(stores)):
            t0 = time.perf_counter()
            ids = stores[name].search(q[None, :], 10 * depth).ids[0]
            times[name].append(time.perf_counter() - t0)
            found[name].append(ids)
    same = all(np.array_equal(a, b) for a, b in zip(*found.values()))
    for name, ts in times.items():
        print(f"{name}: store.search of {10 * depth} candidates p50 {np.median(ts) * 1000:.3f} ms, "
              f"mean {np.mean(ts) * 1000:.3f} ms")
    print(f"same ids from both: {same}")
    for store in stores.values():
        store.close()
    shutil.rmtree(tmp)


def breakdown(idx: Any, queries: np.ndarray) -> None:
    """p50 per stage, then a cProfile of 300 searches."""
    depth = int(idx.manifest.rescore.depth)
    to_query = getattr(idx.reducer, "transform_query", idx.reducer.transform)
    stages: dict[str, list[float]] = {"reduce": [], "store": [], "rerank": [], "Index.search": []}
    for q in queries[:500]:
        q = q[None, :]
        t0 = time.perf_counter()
        r = to_query(q)
        t1 = time.perf_counter()
        c = idx.store.search(r, 10 * depth)
        t2 = time.perf_counter()
        idx.full_vectors.rerank(q, c, 10)
        t3 = time.perf_counter()
        idx.search(q, 10)
        t4 = time.perf_counter()
        for key, dt in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            stages[key].append(dt * 1000)
    print(f"depth {depth} ({10 * depth} candidates): " +
          ", ".join(f"{k} p50 {np.median(v):.3f} ms" for k, v in stages.items()))
    prof = cProfile.Profile()
    prof.enable()
    for q in queries[:300]:
        idx.search(q[None, :], 10)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks search-profile [OPTIONS]`` (the options are the module docstring's)."""
    from slimvec.index.folder import open_index

    ap = argparse.ArgumentParser(prog="python -m benchmarks search-profile",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT / "bench-data" / "realtext-minilm-100k.npy")
    ap.add_argument("--queries", type=Path, default=ROOT / "bench-data" / "realtext-minilm-queries.npy")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--n-queries", type=int, default=1000)
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "slimvec-search-profile")
    ap.add_argument("--before", help="git commit whose store search and re-ranking to compare with")
    ap.add_argument("--before-index", type=Path,
                    help="an index built by --before's code from the same vectors (its shard "
                         "settings and calibrated depth are the before's); default: the same index")
    ap.add_argument("--before-depth", type=int,
                    help="rescoring depth of the before path (what --before's calibration chose)")
    ap.add_argument("--breakdown", action="store_true", help="per-stage p50 and a cProfile instead")
    ap.add_argument("--pool", action="store_true",
                    help="the engine's search pool against one search thread, on copies of the shard")
    ap.add_argument("--python", action="store_true",
                    help="per query, the Python around FAISS's native calls, unfiltered and filtered")
    ap.add_argument("--scan-before", metavar="COMMIT",
                    help="the exact scan of COMMIT against today's, alternated, at 20 / 200 / 2,000 / 20,000 matches")
    ap.add_argument("--out", type=Path, help="write the comparison as JSON here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.python or args.scan_before:
        queries = np.ascontiguousarray(np.load(args.queries)[:args.n_queries], dtype=np.float32)
        with open_index(build_filtered(args.data, args.n, args.work)) as idx:
            print(f"{args.n:,} vectors, {len(queries)} queries, {idx.manifest.recipe}; planner costs "
                  f"{idx.info()['filter_planner']}")
            rows = (scan_comparison(idx, queries, args.scan_before, [20, 200, 2000, 20000]) if args.scan_before
                    else python_share(idx, queries, [50, 10, 1, 0.1]))
        if args.out:
            args.out.write_text(json.dumps({"n": args.n, "queries": len(queries), "rows": rows}, indent=1))
        return
    folders = build(args.data, args.n, args.work)
    queries = np.ascontiguousarray(np.load(args.queries)[:args.n_queries], dtype=np.float32)
    truth = truth_of(np.load(args.work / f"corpus-{args.n}.npy"), queries)
    with open_index(folders["default"]) as idx, open_index(folders["hnsw"]) as ref:
        rescore = idx.manifest.rescore
        assert rescore is not None, "the default recipe re-ranks"
        print(f"{args.n:,} vectors, {len(queries)} queries; default recipe depth "
              f"{rescore.depth} (calibrated recall {rescore.recall})")
        if args.breakdown:
            breakdown(idx, queries)
            return
        if args.pool:
            pool_comparison(idx, queries)
            return
        runs: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
        runs_depth = None
        if args.before:
            old = open_index(args.before_index) if args.before_index else idx
            runs_depth = args.before_depth or (old.manifest.rescore or rescore).depth
            runs["before"] = before_search(old, args.before, args.before_depth)
            print(f"before: {args.before} on {old.folder}, depth {args.before_depth or (old.manifest.rescore or rescore).depth}")
            if args.before_index:  # today's code on the before's index: the code's share alone
                runs["today's code, before's index"] = lambda q: old.search(q, 10).ids
        runs["after"] = lambda q: idx.search(q, 10).ids
        runs["hnsw"] = lambda q: ref.search(q, 10).ids
        rounds = []
        for rnd in range(2):
            row = {}
            for name, fn in runs.items():
                p50, found = timed(fn, queries)
                row[name] = {"p50_ms": round(p50, 4), "recall_at_10": round(recall(found, truth), 4)}
            rounds.append(row)
            print(f"round {rnd + 1}: " + "; ".join(f"{k} p50 {v['p50_ms']:.3f} ms R@10 {v['recall_at_10']:.4f}"
                                                   for k, v in row.items()))
            if "before" in row:
                print(f"  after / before p50 {row['after']['p50_ms'] / row['before']['p50_ms']:.3f}, "
                      f"after / hnsw p50 {row['after']['p50_ms'] / row['hnsw']['p50_ms']:.2f}")
        if args.out:
            args.out.write_text(json.dumps({"n": args.n, "queries": len(queries), "before": args.before,
                                            "before_index": str(args.before_index or folders["default"]),
                                            "before_depth": runs_depth,
                                            "depth": rescore.depth, "rounds": rounds}, indent=1))



def build_filtered(data: Path, n: int, work: Path) -> Path:
    """The default recipe over the first ``n`` rows of ``data`` with the filtered suite's integer
    payload ``bucket`` (:func:`slimvec.benchmarks.filtered.bucket_field`) indexed (reused)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from slimvec.benchmarks.filtered import bucket_field
    from slimvec.index.folder import open_index
    from slimvec.migrate import MigrateOptions, migrate

    folder = work / f"filtered-{n}"
    if (folder / "manifest.json").exists():
        return folder
    work.mkdir(parents=True, exist_ok=True)
    x = np.ascontiguousarray(np.load(data, mmap_mode="r")[:n], dtype=np.float32)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), x.shape[1]).cast(pa.list_(pa.float32()))
    src = work / f"filtered-{n}.parquet"
    pq.write_table(pa.table({"id": np.arange(1, n + 1), "vector": vec, "bucket": bucket_field(n)}), src)
    migrate(f"parquet:{src}", folder, MigrateOptions(progress=False, recipe=DEFAULT_FILTERED))
    with open_index(folder) as idx:
        idx.create_payload_index("bucket", "integer")
    src.unlink()
    return folder


#: the recipe ``--python`` profiles (the default recipe: FAISS, so FAISS calls are the native ones)
DEFAULT_FILTERED = "none|faiss:HNSW16,SQ4,ef=128,efc=200|rescore=auto,keep_full=float16"


def _native_timer() -> tuple[list[float], Callable[[], None]]:
    """Wrap every FAISS class's ``search`` and ``add_sa_codes`` (the native calls of the default
    recipe's paths: the graph, the selector search, the exact scan's flat index) and ``np.take``
    (the gathers of kept rows: memory, not Python) so that the wall and the thread's CPU time
    spent inside them add up in the returned two-item list; the callable unwraps them."""
    import functools

    import faiss

    spent = [0.0, 0.0]
    undo = []
    targets = [(cls, name) for cls in {c for c in vars(faiss).values() if isinstance(c, type)}
               for name in ("search", "add_sa_codes")] + [(np, "take")]
    for cls, name in targets:
        fn = cls.__dict__.get(name)
        if fn is not None:
            @functools.wraps(fn)
            def timed(*a: Any, _fn: Any = fn, **kw: Any) -> Any:
                t0, c0 = time.perf_counter(), time.thread_time()
                try:
                    return _fn(*a, **kw)
                finally:
                    spent[0] += time.perf_counter() - t0
                    spent[1] += time.thread_time() - c0
            setattr(cls, name, timed)
            undo.append((cls, name, fn))

    def restore() -> None:
        for cls, name, fn in undo:
            setattr(cls, name, fn)
    return spent, restore


def python_share(idx: Any, queries: np.ndarray, selectivities: list[float]) -> list[dict[str, Any]]:
    """Per query, one thread: the wall time of ``Index.search`` (from a vector, k=10), the time
    inside FAISS's native calls, and the rest, the Python around them; medians, unfiltered and at
    each selectivity (``bucket < 10 * s`` matches ``s`` % of the documents), with the plan taken.
    The same split in the thread's CPU time (``*_cpu_*``) leaves out the waits of a loaded machine,
    where another process holds the core (each wrapped call adds two CPU clock reads)."""
    spent, restore = _native_timer()
    rows = []
    try:
        for sel in [None, *selectivities]:
            flt = None if sel is None else {"must": [{"key": "bucket", "range": {"lt": int(round(10 * sel))}}]}
            idx.search(queries[:5], 10, filter=flt)  # warm: first-use loads and caches
            took = np.empty((len(queries), 4))  # wall, native wall, CPU, native CPU
            for i, q in enumerate(queries):
                spent[0] = spent[1] = 0.0
                t0, c0 = time.perf_counter(), time.thread_time()
                idx.search(q[None, :], 10, filter=flt)
                took[i] = time.perf_counter() - t0, spent[0], time.thread_time() - c0, spent[1]
            w, nat, cpu, ncpu = (took * 1e6).T
            plan = "unfiltered" if sel is None else (idx.last_filter_plan or {}).get("path")
            med = {name: round(float(np.median(v)), 1) for name, v in (
                ("wall_p50_us", w), ("native_p50_us", nat), ("python_p50_us", w - nat),
                ("cpu_p50_us", cpu), ("native_cpu_p50_us", ncpu), ("python_cpu_p50_us", cpu - ncpu))}
            rows.append({"selectivity": sel, "path": plan, **med})
            print(f"{'unfiltered' if sel is None else f'{sel:g} %':>10} ({plan}): Index.search p50 "
                  f"{med['wall_p50_us']:.0f} us, inside FAISS {med['native_p50_us']:.0f} us, Python around "
                  f"it {med['python_p50_us']:.0f} us; CPU time {med['cpu_p50_us']:.0f} / "
                  f"{med['native_cpu_p50_us']:.0f} / {med['python_cpu_p50_us']:.0f} us")
    finally:
        restore()
    return rows


def scan_comparison(idx: Any, queries: np.ndarray, commit: str, counts: list[int]) -> list[dict[str, Any]]:
    """The exact scan of ``commit`` (its ``slimvec/index/lifecycle.py`` loaded beside today's)
    against today's on the same open index, over ``counts`` random live ids, alternated query by
    query: p50 each, the ratio, and whether every query got the same ids (issue 51 item 1)."""
    from slimvec.index.lifecycle import exact_scan

    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:slimvec/index/lifecycle.py"],
                         check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "_before_lifecycle.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("_before_lifecycle", path)
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    live = idx.full_vectors.ids()
    rng = np.random.default_rng(1)
    rows = []
    for m in counts:
        allowed = np.sort(rng.choice(live, min(m, len(live)), replace=False))
        times: dict[str, list[float]] = {"before": [], "after": []}
        same = 0
        for q in queries:
            got = []
            for name, fn in (("before", old.exact_scan), ("after", exact_scan)):
                t0 = time.perf_counter()
                got.append(fn(idx, q[None, :], allowed, 10))
                times[name].append(time.perf_counter() - t0)
            same += int(np.array_equal(got[0].ids, got[1].ids))
        b, a = (float(np.median(times[k]) * 1e6) for k in ("before", "after"))
        rows.append({"matches": len(allowed), "before_p50_us": round(b, 1), "after_p50_us": round(a, 1),
                     "ratio": round(b / a, 2), "same_ids": same, "queries": len(queries)})
        print(f"{len(allowed):>7,} matches: before p50 {b:,.0f} us ({b / len(allowed):.3f} us a vector), "
              f"after {a:,.0f} us ({a / len(allowed):.3f}), before / after {b / a:.1f}x, "
              f"same ids on {same} / {len(queries)} queries")
    return rows
