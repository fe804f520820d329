"""One HNSW graph against the same vectors split into segments: build time and search p50.

    python -m benchmarks.segment_split --data bench-data/realtext-minilm-100k.npy \\
        --queries bench-data/realtext-minilm-queries.npy --segments 2

The default recipe's graph (``HNSW16,SQ4``, efc 200, ef 128 at search) over the first ``--n``
vectors: built as one graph with every core (FAISS's OpenMP ``add``, as the single-process
writer builds it), and as ``--segments`` graphs of equal parts built at once, one thread each
(as Ray tasks of one CPU build a FAISS index's segments). Then single-query search of each,
alternated query by query: the one graph, and the segments searched in parallel threads
and merged (the store's fan-out). Recall@10 of the top-40 candidates against exact float
truth, before any re-rank. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

FACTORY, EFC, EF, DEPTH = "HNSW16,SQ4", 200, 128, 40


def _graph(x: np.ndarray, threads: int) -> Any:
    import faiss

    faiss.omp_set_num_threads(threads)
    index = faiss.index_factory(x.shape[1], FACTORY, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = EFC
    index.train(x[:20_000])
    index.add(x)
    index.hnsw.efSearch = EF
    return index


def measure(x: np.ndarray, q: np.ndarray, segments: int) -> dict[str, Any]:
    """Build and search figures of one graph against ``segments`` graphs over ``x``."""
    import faiss

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    t0 = time.perf_counter()
    one = _graph(x, cores)
    one_s = time.perf_counter() - t0
    parts = np.array_split(np.arange(len(x)), segments)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(segments) as pool:
        graphs = list(pool.map(lambda p: _graph(x[p], 1), parts))
    seg_s = time.perf_counter() - t0
    starts = [int(p[0]) for p in parts]
    faiss.omp_set_num_threads(1)
    pool = ThreadPoolExecutor(segments)

    def fan(v: np.ndarray) -> np.ndarray:
        got = list(pool.map(lambda g: g.search(v, DEPTH), graphs))
        d = np.concatenate([s for s, _ in got], axis=1)
        p = np.concatenate([np.where(i >= 0, i + a, -1) for (_, i), a in zip(got, starts)], axis=1)
        return np.take_along_axis(p, np.argsort(-d, axis=1)[:, :DEPTH], axis=1)

    truth = np.argsort(-(q @ x.T), axis=1)[:, :10]
    times: dict[str, list[float]] = {"one": [], "segments": []}
    hits = {"one": 0, "segments": 0}
    for i in range(len(q)):
        for name, search in (("one", lambda v: one.search(v, DEPTH)[1]), ("segments", fan)):
            t = time.perf_counter()
            found = search(q[i:i + 1])
            times[name].append(time.perf_counter() - t)
            hits[name] += len(set(found[0, :10].tolist()) & set(truth[i].tolist()))
    pool.shutdown()
    return {"n": len(x), "segments": segments, "cores": cores, "factory": FACTORY, "efc": EFC,
            "ef": EF, "build_seconds": {"one": round(one_s, 1), "segments": round(seg_s, 1)},
            "build_ratio": round(seg_s / one_s, 2),
            "p50_ms": {k: round(float(np.median(v)) * 1e3, 3) for k, v in times.items()},
            "p99_ms": {k: round(float(np.percentile(v, 99)) * 1e3, 3) for k, v in times.items()},
            "recall_at_10_of_top40": {k: round(h / (10 * len(q)), 4) for k, h in hits.items()}}


def main() -> None:
    import faiss

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--queries", required=True)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--segments", type=int, default=2)
    parser.add_argument("--n-queries", type=int, default=500)
    args = parser.parse_args()
    x = np.array(np.load(args.data, mmap_mode="r")[:args.n], dtype=np.float32)  # a copy: normalised in place
    q = np.array(np.load(args.queries)[:args.n_queries], dtype=np.float32)
    faiss.normalize_L2(x)
    faiss.normalize_L2(q)
    print(json.dumps(measure(x, q, args.segments), indent=2))


if __name__ == "__main__":
    main()
