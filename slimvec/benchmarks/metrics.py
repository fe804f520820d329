"""Benchmark metrics, each a small pure function over arrays (tested on hand-computed cases).

Exact kNN, recall@k and single-query timing live in :mod:`slimvec.measure` (shared with the
indexer's calibration); ``exact_topk``, ``recall_at_k``, ``time_single`` and ``latency_summary``
are those, over corpus rows.

Conventions: result arrays hold corpus *rows* (0-based), ``-1`` for "no result"; a metric that does
not apply is ``None`` (``null`` in ``results.json``), never 0.
"""

from __future__ import annotations

import numpy as np

from slimvec.measure import exact_knn, latency_summary, recall_at_k, similarities, time_single

__all__ = [
    "time_single",
    "exact_topk",
    "drop_rows",
    "recall_at_k",
    "task_recall_mrr",
    "sts_spearman",
    "latency_summary",
    "cluster_accuracy",
    "routed_search",
]


def exact_topk(corpus: np.ndarray, queries: np.ndarray, k: int, *,
               exclude: np.ndarray | None = None, metric: str = "cosine") -> np.ndarray:
    """Exact ``k`` nearest corpus rows of each query, best first.

    Parameters
    ----------
    corpus : ndarray (n, d)
    queries : ndarray (q, d)
    k : int
    exclude : ndarray (q,), optional
        A corpus row to leave out of each query's results (the query itself).
    metric : {"cosine", "ip", "l2"}
        ``cosine`` expects normalised vectors (inner product).

    Returns
    -------
    ndarray int64 (q, min(k, n))
    """
    corpus = np.asarray(corpus, dtype=np.float32)
    k = min(int(k), len(corpus) - (1 if exclude is not None else 0))
    if k <= 0:
        return np.empty((len(queries), 0), dtype=np.int64)
    # cosine here means normalised vectors: scored by their inner product, not normalised again
    return exact_knn(corpus, queries, k, metric="ip" if metric == "cosine" else metric,
                     exclude=exclude)[0]


def drop_rows(found: np.ndarray, rows: np.ndarray | None, k: int) -> np.ndarray:
    """The first ``k`` results of each query once its own row ``rows[i]`` is removed.

    ``found`` is searched with ``k + 1`` results so that ``k`` remain; without ``rows`` the first
    ``k`` columns are returned unchanged.
    """
    found = np.asarray(found, dtype=np.int64)
    if rows is None:
        return found[:, :k]
    out = np.full((len(found), k), -1, dtype=np.int64)
    for i, (res, own) in enumerate(zip(found, rows)):
        kept = res[res != own][:k]
        out[i, :len(kept)] = kept
    return out


def task_recall_mrr(found: np.ndarray, task_query: np.ndarray, task_target: np.ndarray,
                    k: int = 10) -> tuple[float | None, float | None]:
    """Task recall@k and MRR@k: is ``task_target[j]`` among query ``task_query[j]``'s top k?

    Parameters
    ----------
    found : ndarray (n_queries, >= k)
        Result rows of each query, the query itself already removed.
    task_query, task_target : ndarray (n_entries,)
        Query index and the corpus row it should find (each duplicate pair gives two entries).

    Returns
    -------
    (recall, mrr)
        ``(None, None)`` when there are no task entries.
    """
    if len(task_query) == 0:
        return None, None
    top = np.asarray(found)[np.asarray(task_query), :k]
    match = top == np.asarray(task_target)[:, None]
    hit = match.any(axis=1)
    rank = match.argmax(axis=1) + 1
    rr = np.where(hit, 1.0 / rank, 0.0)
    return float(hit.mean()), float(rr.mean())


def sts_spearman(Z: np.ndarray, rows_a: np.ndarray, rows_b: np.ndarray, gold: np.ndarray) -> float | None:
    """Spearman correlation of cosine(Z[a], Z[b]) with the gold scores (``None`` if < 2 pairs)."""
    from scipy.stats import spearmanr

    if len(rows_a) < 2:
        return None
    A, B = Z[np.asarray(rows_a)], Z[np.asarray(rows_b)]
    na = np.linalg.norm(A, axis=1)
    nb = np.linalg.norm(B, axis=1)
    cos = np.einsum("ij,ij->i", A, B) / np.maximum(na * nb, 1e-12)
    rho = spearmanr(cos, np.asarray(gold)).statistic
    return None if not np.isfinite(rho) else float(rho)


def cluster_accuracy(labels: np.ndarray, dup_pairs: np.ndarray) -> float | None:
    """Share of duplicate pairs whose two sides carry the same cluster label (``None`` if none)."""
    dup_pairs = np.asarray(dup_pairs).reshape(-1, 2)
    if len(dup_pairs) == 0:
        return None
    labels = np.asarray(labels)
    return float(np.mean(labels[dup_pairs[:, 0]] == labels[dup_pairs[:, 1]]))


def cluster_balance(labels: np.ndarray) -> dict[str, float]:
    """How evenly a clustering spreads the corpus (a collapsed clustering routes every query to one
    huge cluster, which scans the corpus and looks accurate).

    Returns
    -------
    dict
        ``clusters_used`` (non-empty clusters), ``effective_clusters`` (exp of the entropy of the
        cluster sizes: equals ``clusters_used`` when all are equal) and ``largest_cluster_share``.
    """
    counts = np.bincount(np.asarray(labels, dtype=np.int64).ravel())
    counts = counts[counts > 0]
    if counts.sum() == 0:
        return {"clusters_used": 0, "effective_clusters": 0.0, "largest_cluster_share": 0.0}
    p = counts / counts.sum()
    return {"clusters_used": int(len(counts)), "effective_clusters": float(np.exp(-(p * np.log(p)).sum())),
            "largest_cluster_share": float(p.max())}


def routed_search(vectors: np.ndarray, labels: np.ndarray, queries: np.ndarray,
                  query_clusters: np.ndarray, k: int, *, exclude: np.ndarray | None = None,
                  metric: str = "cosine") -> tuple[np.ndarray, float]:
    """Search only the corpus rows in each query's routed clusters.

    Parameters
    ----------
    vectors : ndarray (n, d)
        Corpus vectors in the space searched (reduced or full).
    labels : ndarray (n,)
        Cluster of each corpus row.
    queries : ndarray (q, d)
    query_clusters : ndarray (q, p)
        The ``p`` clusters each query is routed to.
    k : int
    exclude : ndarray (q,), optional
        Corpus row of each query, left out of its results.

    Returns
    -------
    found : ndarray int64 (q, k)
        Result rows (``-1`` where the routed clusters hold fewer than k rows).
    fraction_scanned : float
        Mean share of the corpus scored per query.
    """
    labels = np.asarray(labels)
    members: dict[int, np.ndarray] = {int(c): np.flatnonzero(labels == c) for c in np.unique(labels)}
    empty = np.zeros(0, dtype=np.int64)
    found = np.full((len(queries), k), -1, dtype=np.int64)
    scanned = 0
    for i, (q, clusters) in enumerate(zip(queries, np.asarray(query_clusters))):
        cand = np.concatenate([members.get(int(c), empty) for c in clusters])
        if exclude is not None:
            cand = cand[cand != exclude[i]]
        scanned += len(cand)
        if len(cand) == 0:
            continue
        sims = similarities(q[None, :], vectors[cand], "ip" if metric == "cosine" else metric)[0]
        top = np.argsort(-sims, kind="stable")[:k]
        found[i, :len(top)] = cand[top]
    return found, float(scanned / max(len(queries), 1) / max(len(vectors), 1))
