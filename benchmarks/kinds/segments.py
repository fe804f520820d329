"""Acknowledged writes during a bulk load, against the graph built alone (``python -m benchmarks segments``).

One FAISS store of the default recipe (``HNSW16,SQ4``, ``efc=200``, cosine, its graph over float16
codes as ``slimvec ingest`` builds it) takes ``docs`` vectors in batches of ``batch``; each batch is
one commit (``upsert`` + ``flush``, what a ``wait=true`` upsert is to the service's writer), and
right after the commit of every fourth batch 8 of its vectors are searched (k=1): each must be found
as its own nearest neighbour once acknowledged (the searches are timed inside the load). The load
ends with ``finalize`` (every vector in the graph, the file written whole). Beside it, in the same
run and on the same cores, FAISS alone builds the same graph from the same vectors in insertions
of 8,192 (no store, no commit, no search): the floor of the whole load.

The vectors are unit rows of a rank-48 mixture plus noise (:class:`benchmarks.kinds.ingest.MatrixEncoder`'s
matrix, seeded), 384-d like MiniLM's.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["measure_segments", "segments_markdown"]

log = logging.getLogger(__name__)

FACTORY, EFC = "HNSW16,SQ4", 200
#: vectors of every CHECK_EVERY-th acknowledged batch searched right after its commit
CHECKED, CHECK_EVERY = 8, 4


def _vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, 48)).astype(np.float32) @ rng.standard_normal((48, dim)).astype(np.float32)
    m += 0.3 * rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _graph_alone(X: np.ndarray) -> float:
    import faiss

    from slimvec.connectors.faiss_build import Float16Build

    index = faiss.index_factory(X.shape[1], FACTORY, faiss.METRIC_INNER_PRODUCT)
    faiss.downcast_index(index).hnsw.efConstruction = EFC
    t0 = time.perf_counter()
    index.train(X[:20000])
    Float16Build(index)
    for lo in range(0, len(X), 8192):
        index.add(X[lo:lo + 8192])
    return time.perf_counter() - t0


def _bulk_load(X: np.ndarray, batch: int, folder: Path) -> dict[str, Any]:
    from slimvec.connectors.faiss_store import FaissStore

    store = FaissStore(str(folder), factory=FACTORY, ef=128, efc=EFC).create(X.shape[1], "cosine")
    store.fp16_build = True
    found = checked = 0
    rng = np.random.default_rng(1)
    search_ms: list[float] = []
    t0 = time.perf_counter()
    for lo in range(0, len(X), batch):
        ids = np.arange(lo, min(lo + batch, len(X)))
        store.upsert(ids, X[ids])
        store.flush()
        if lo + batch >= 20000 and (lo // batch) % CHECK_EVERY == 0:  # trained: batches sampled
            some = ids[rng.choice(len(ids), min(CHECKED, len(ids)), replace=False)]
            q0 = time.perf_counter()
            hits = store.search(X[some], 1).ids[:, 0]
            search_ms.append((time.perf_counter() - q0) * 1000 / len(some))
            found, checked = found + int((hits == some).sum()), checked + len(some)
    acked = time.perf_counter() - t0
    store.finalize()
    total = time.perf_counter() - t0
    store.close()
    return {"acked_seconds": round(acked, 2), "total_seconds": round(total, 2),
            "acked_per_s": round(len(X) / acked, 1), "found_on_ack": f"{found}/{checked}",
            "search_ms_per_query_during_load_p50": round(float(np.median(search_ms)), 3) if search_ms else None}


def measure_segments(docs: int = 200_000, threads: int = 2, batch: int = 256, dim: int = 384) -> dict[str, Any]:
    """Time :func:`_graph_alone` and the store's bulk load of the same vectors on ``threads``
    cores (affinity and OpenMP threads); see the module.

    Returns
    -------
    dict
        ``{"documents", "threads", "batch", "graph_alone_seconds", "load": {...}, "ratio"}``;
        ``ratio`` is the whole load's time over the graph alone.
    """
    import faiss

    from slimvec.encoder import busy_cores

    X = _vectors(docs, dim)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    old = faiss.omp_get_max_threads()
    others = busy_cores(1.0)
    if cpus:
        os.sched_setaffinity(0, cpus[:threads])
    faiss.omp_set_num_threads(threads)
    try:
        alone = _graph_alone(X)
        log.info("graph alone: %.1f s", alone)
        with tempfile.TemporaryDirectory(prefix="slimvec-segments-") as tmp:
            load = _bulk_load(X, batch, Path(tmp) / "s")
        log.info("bulk load: %s", load)
    finally:
        faiss.omp_set_num_threads(old)
        if cpus:
            os.sched_setaffinity(0, cpus)
    return {"documents": docs, "threads": threads, "batch": batch, "dim": dim,
            "recipe_store": f"faiss:{FACTORY},ef=128,efc={EFC}",
            "graph_alone_seconds": round(alone, 2), "load": load,
            "ratio": round(load["total_seconds"] / alone, 3),
            "others_cores": None if others is None else round(others, 2)}


def segments_markdown(result: dict[str, Any]) -> str:
    """The Markdown table of :func:`measure_segments`'s result."""
    load = result["load"]
    return "\n".join([
        f"{result['documents']:,} vectors ({result['dim']}-d), {result['recipe_store']}, "
        f"{result['threads']} cores, commits of {result['batch']}:", "",
        "| graph alone s | load acknowledged s | acknowledged vectors/s | whole load s | whole / graph alone "
        "| found at top-1 on ack | search ms/query during load (p50) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {result['graph_alone_seconds']:.1f} | {load['acked_seconds']:.1f} | {load['acked_per_s']:,.0f} "
        f"| {load['total_seconds']:.1f} | {result['ratio']:.2f} | {load['found_on_ack']} "
        f"| {load['search_ms_per_query_during_load_p50']} |"]) + "\n"
