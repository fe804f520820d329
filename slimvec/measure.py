"""One measuring core for the product and the harness: exact kNN, recall@k, single-query timing
and the rescored search itself.

The indexer (calibration of ``rescore=auto``) may not import the benchmark harness
(``tests/test_layering.py``), and the harness must measure what users run (ann-benchmarks times
exactly the ``search`` a user calls). So both import this low module, which imports nothing of
either::

    res = rescored_search(store, reduced, full_queries, k, k * R, full)   # Index.search's path
    ids, scores = exact_knn(corpus, queries, k, metric="cosine")          # the truth
    recall_at_k(res.ids, ids, k)                                          # neighbour recall@k
    time_single(lambda i: index.search(queries[i:i + 1], k), len(queries), 200, 3)

:class:`IndexUnderTest` is the harness's thin index: a reducer, a store and the full vectors
searched through :func:`reduce_queries` + :func:`rescored_search`, the code path of
:meth:`slimvec.index.folder.Index.search`, so a benchmark row times the product's search.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slimvec.connectors.base import SearchResult, VectorStore

__all__ = ["exact_knn", "similarities", "paired_similarities", "recall_at_k", "time_single", "time_alternating", "latency_summary",
           "reduce_queries", "rescored_search", "IndexUnderTest", "Lookup", "TRUTH_BLOCK"]

#: corpus rows scored at once by :func:`exact_knn` (memory ``query block × TRUTH_BLOCK`` floats)
TRUTH_BLOCK = 65536
#: queries scored at once by :func:`exact_knn`
_QUERY_BLOCK = 1024

#: ids -> float32 vectors of those corpus ids (a memory-mapped file read in blocks)
Lookup = Callable[[np.ndarray], np.ndarray]


# ---------------------------------------------------------------------------------- machine
def cpu_seconds(children: bool = False) -> tuple[float, float, float] | None:
    """``(machine busy CPU seconds since boot, this process's CPU seconds, monotonic wall clock)``
    from ``/proc/stat`` and ``getrusage`` (``children``: add the reaped children's), or None
    where ``/proc/stat`` cannot be read. Two samples give what *other* processes used between
    them: busy minus own, over the wall time (what a load average cannot say, as it counts the
    measurement itself)."""
    import os
    import resource

    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    whos = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) if children else (resource.RUSAGE_SELF,)
    own = sum(getattr(resource.getrusage(who), attr) for who in whos for attr in ("ru_utime", "ru_stime"))
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK"), own, time.monotonic()


# ------------------------------------------------------------------------------- exact search
def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def similarities(queries: np.ndarray, corpus: np.ndarray, metric: str = "cosine") -> np.ndarray:
    """Exact similarity (q, n) of queries to corpus rows, larger is closer.

    ``cosine`` normalises both sides; ``ip`` is the plain inner product; ``l2`` is
    ``2 q·x - |x|²`` (the negated squared distance up to the query's own norm, which ranks the
    same). Queries already normalised for cosine give the same scores.
    """
    q = np.asarray(queries, dtype=np.float32)
    x = np.asarray(corpus, dtype=np.float32)
    if metric == "cosine":
        q, x = _unit(q), _unit(x)
    s = q @ x.T
    if metric == "l2":
        s = 2.0 * s - np.einsum("ij,ij->i", x, x)[None, :]
    return s


def paired_similarities(queries: np.ndarray, corpus: np.ndarray, metric: str = "cosine") -> np.ndarray:
    """Similarity (n,) of each query row to the corpus row beside it (:func:`similarities`'s
    formula, row by row)."""
    q = np.asarray(queries, dtype=np.float32)
    x = np.asarray(corpus, dtype=np.float32)
    if metric == "cosine":
        q, x = _unit(q), _unit(x)
    s = np.einsum("ij,ij->i", q, x)
    if metric == "l2":
        s = 2.0 * s - np.einsum("ij,ij->i", x, x)
    return s


def _top_of(s: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best columns of each row of ``s`` (ids broadcast), in no particular order."""
    if k >= s.shape[1]:
        return np.broadcast_to(ids, s.shape).copy(), s
    top = np.argpartition(-s, k - 1, axis=1)[:, :k]
    return np.broadcast_to(ids, s.shape)[np.arange(len(s))[:, None], top], np.take_along_axis(s, top, axis=1)


def _array_lookup(arr: np.ndarray, ids: np.ndarray | None) -> tuple[np.ndarray, Lookup]:
    """Ids and a lookup of an in-memory corpus (row numbers when ``ids`` is None)."""
    if ids is None:
        return np.arange(len(arr), dtype=np.int64), lambda wanted: arr[wanted[0]:wanted[-1] + 1]
    ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    return ids, lambda wanted: arr[order[np.searchsorted(ids[order], wanted)]]


def exact_knn(corpus: np.ndarray | Lookup, queries: np.ndarray, k: int, *, metric: str = "cosine",
              ids: np.ndarray | None = None, exclude: np.ndarray | None = None,
              block: int = TRUTH_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``k`` nearest corpus vectors of each query, best first: ids (q, k) and scores (q, k).

    Parameters
    ----------
    corpus : ndarray (n, d) or callable
        The corpus vectors, or a lookup ``ids -> vectors`` (a memory-mapped file: the corpus is
        streamed in blocks of ``block`` ids, never loaded whole); a lookup needs ``ids``.
    queries : ndarray (q, d)
    k : int
        Neighbours per query; fewer columns when the corpus is smaller, ``-1`` / ``-inf`` padding
        where exclusions leave fewer than ``k``.
    metric : {"cosine", "ip", "l2"}
        As :func:`similarities`.
    ids : ndarray (n,), optional
        The corpus ids returned (default: row numbers 0..n-1).
    exclude : ndarray (q,), optional
        Each query's own corpus id, left out of its neighbours (``-1``: none).
    block : int
        Corpus rows scored at once.

    Returns
    -------
    (ids, scores)
        int64 and float32 arrays, each row sorted by decreasing score.
    """
    if callable(corpus):
        if ids is None:
            raise ValueError("exact_knn: a corpus lookup needs the corpus ids (ids=...)")
        all_ids, lookup = np.asarray(ids, dtype=np.int64), corpus
    else:
        all_ids, lookup = _array_lookup(np.asarray(corpus, dtype=np.float32), ids)
    q = np.asarray(queries, dtype=np.float32)
    k = max(0, min(int(k), len(all_ids)))
    out_i = np.full((len(q), k), -1, dtype=np.int64)
    out_s = np.full((len(q), k), -np.inf, dtype=np.float32)
    if k == 0 or len(q) == 0:
        return out_i, out_s
    for lo in range(0, len(q), _QUERY_BLOCK):
        qb = q[lo:lo + _QUERY_BLOCK]
        own = None if exclude is None else np.asarray(exclude, dtype=np.int64)[lo:lo + _QUERY_BLOCK]
        best_i: np.ndarray | None = None
        best_s: np.ndarray | None = None
        for start in range(0, len(all_ids), block):
            bids = all_ids[start:start + block]
            s = similarities(qb, lookup(bids), metric).astype(np.float32, copy=False)
            if own is not None:
                s[bids[None, :] == own[:, None]] = -np.inf  # a query is not its own neighbour
            if best_i is None or best_s is None:
                best_i, best_s = _top_of(s, bids, k)
            else:
                best_i, best_s = _top_of(np.concatenate([best_s, s], axis=1),
                                         np.concatenate([best_i, np.broadcast_to(bids, s.shape)], axis=1), k)
        assert best_i is not None and best_s is not None
        order = best_s.argsort(axis=1, kind="stable")[:, ::-1]  # best first
        top_s = np.take_along_axis(best_s, order, axis=1)
        out_i[lo:lo + len(qb)] = np.where(np.isfinite(top_s), np.take_along_axis(best_i, order, axis=1), -1)
        out_s[lo:lo + len(qb)] = top_s
    return out_i, out_s


# ------------------------------------------------------------------------------------ recall
def recall_at_k(found: np.ndarray, truth: np.ndarray, k: int = 10, *, exclude: np.ndarray | None = None,
                found_scores: np.ndarray | None = None, floor: np.ndarray | None = None) -> float:
    """Neighbour recall@k: mean over queries of |found[:k] ∩ truth[:k]| / k.

    Parameters
    ----------
    found : ndarray (q, >= k)
        Result ids, ``-1`` for no result (ignored).
    truth : ndarray (q, k')
        Exact neighbour ids; the denominator is ``min(k, k')``.
    exclude : ndarray (q,), optional
        Each query's own id, dropped from its results before the first ``k`` are taken (a
        corpus vector used as query finds itself).
    found_scores, floor : ndarray, optional
        Exact scores of ``found`` and, per query, the lowest score that still counts as a hit
        (the k-th true score minus a tie tolerance): a found id tied with the truth's k-th is as
        near as the truth's own choice among the tied ones.
    """
    found = np.asarray(found)
    truth = np.asarray(truth)[:, :k]
    if len(truth) == 0:
        raise ValueError("recall_at_k needs at least one query")
    hits = []
    for i, (res, tru) in enumerate(zip(found, truth)):
        if exclude is None:  # the first k results, padding (-1) not counted
            res = res[:k]
            if found_scores is not None:
                found_scores = np.asarray(found_scores)[:, :k]
        keep = res >= 0
        if exclude is not None:
            keep &= res != exclude[i]
        top = res[keep][:k]
        hit = set(top.tolist()) & set(tru[tru >= 0].tolist())
        if found_scores is not None and floor is not None:
            scored = np.asarray(found_scores[i])[keep][:k]
            hit |= {int(r) for r, sc in zip(top.tolist(), scored.tolist()) if sc >= floor[i]}
        hits.append(min(len(hit), k))
    return float(np.mean(hits) / truth.shape[1])  # the harness's formula, to the last bit


# ------------------------------------------------------------------------------------ timing
def latency_summary(times_ms: Sequence[float] | np.ndarray) -> dict[str, float]:
    """``latency_p50_ms``, ``latency_p95_ms``, ``latency_p99_ms`` of per-query times."""
    t = np.asarray(times_ms, dtype=np.float64)
    if t.size == 0:
        raise ValueError("latency_summary needs at least one time")
    p50, p95, p99 = np.percentile(t, [50, 95, 99])
    return {"latency_p50_ms": float(p50), "latency_p95_ms": float(p95), "latency_p99_ms": float(p99)}


def time_single(search_i: Callable[[int], Any], n_queries: int, n: int, repeats: int) -> dict[str, float]:
    """Per-query latency (ms) of ``search_i(i)`` for the first ``n`` queries: warm-up, then the
    median of ``repeats`` timings of each query, summarised as p50/p95/p99."""
    count = max(1, min(n, n_queries))
    for i in range(min(20, count)):  # warm-up
        search_i(i)
    times = np.empty((repeats, count))
    for r in range(repeats):
        for i in range(count):
            t0 = time.perf_counter()
            search_i(i)
            times[r, i] = (time.perf_counter() - t0) * 1000.0
    return latency_summary(np.median(times, axis=0))


def time_alternating(searches: Sequence[Callable[[int], Any]], n_queries: int, n: int,
                     repeats: int) -> list[dict[str, float]]:
    """:func:`time_single` of several searches side by side: each query is timed on every search
    in turn (the order rotating per query), so load on a shared machine falls on all alike and
    their ratios are fair. One summary per search, in order."""
    count = max(1, min(n, n_queries))
    for search_i in searches:  # warm-up
        for i in range(min(20, count)):
            search_i(i)
    times = np.empty((len(searches), repeats, count))
    for r in range(repeats):
        for i in range(count):
            for j in range(len(searches)):
                at = (j + i + r) % len(searches)
                t0 = time.perf_counter()
                searches[at](i)
                times[at, r, i] = (time.perf_counter() - t0) * 1000.0
    return [latency_summary(np.median(t, axis=0)) for t in times]


# ------------------------------------------------------------------------- the product's search
def reduce_queries(reducer: Any, vectors: np.ndarray) -> np.ndarray:
    """Full-dimension queries into the stored space (the reducer's ``transform_query``); ``None``
    (full-dimension stores) returns them unchanged."""
    return vectors if reducer is None else reducer.transform_query(vectors)


def rescored_search(store: VectorStore, reduced: np.ndarray, full_queries: np.ndarray, k: int,
                    candidates: int | None = None, full: Any = None, **params: Any) -> SearchResult:
    """The search after the reducer, as :meth:`Index.search` runs it.

    Parameters
    ----------
    store : VectorStore
        The open reduced (or quantized) store.
    reduced, full_queries : ndarray
        The queries in the stored space and at full dimension.
    k : int
        Results per query.
    candidates : int, optional
        Candidates fetched before re-ranking (``k × R``); ``None`` or 0: no re-ranking.
    full : FullVectors, optional
        The full vectors that re-rank; ``None`` with ``candidates``: the store re-ranks from the
        full vectors it keeps itself (``search_rescored``, Qdrant named vectors).
    **params
        Store search parameters (``ef``...).
    """
    if not candidates:
        return store.search(reduced, k, **params)
    if full is None:
        return store.search_rescored(reduced, full_queries, k, int(candidates), **params)
    return full.rerank(full_queries, store.search(reduced, int(candidates), **params), k)


@dataclass
class IndexUnderTest:
    """A built reducer + store (+ full vectors) searched the way :meth:`Index.search` searches.

    The benchmark harness times this object's :meth:`search`, whose path is the product's:
    :func:`reduce_queries` then :func:`rescored_search`.

    Attributes
    ----------
    store : VectorStore
    reducer : Reducer or None
        ``None``: the store holds the full vectors (peers).
    full : FullVectors or None
        Re-ranks when a depth is given (``None``: the store keeps them, or no re-ranking).
    params : dict
        Store search parameters.
    """

    store: VectorStore
    reducer: Any = None
    full: Any = None
    params: dict[str, Any] = field(default_factory=dict)

    def search(self, queries: np.ndarray, k: int, candidates: int | None = None) -> SearchResult:
        """Full-dimension queries (n, dim) -> ``k`` results each, re-ranked from ``candidates``."""
        queries = np.asarray(queries, dtype=np.float32)
        return rescored_search(self.store, reduce_queries(self.reducer, queries), queries, k,
                               candidates, self.full, **self.params)
