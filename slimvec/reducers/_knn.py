"""k-nearest-neighbour graphs with FAISS, never a dense N x N distance matrix.

Exact (``IndexFlatL2``, searched in blocks) up to :data:`EXACT_MAX` points, HNSW above; memory is
O(N k) for the result plus the index.
"""

from __future__ import annotations

import numpy as np

from slimvec.errors import ConfigError

__all__ = ["knn_graph", "knn_query", "EXACT_MAX"]

#: above this many points the graph is built with an approximate HNSW index
EXACT_MAX = 20000
_BLOCK = 4096


def _index(points: np.ndarray, exact: bool, k: int):
    import faiss

    d = points.shape[1]
    if exact:
        index = faiss.IndexFlatL2(d)
    else:
        index = faiss.IndexHNSWFlat(d, 32)
        index.hnsw.efConstruction = 80
        index.hnsw.efSearch = max(64, 2 * k)
    index.add(points)
    return index


def knn_query(
    points: np.ndarray, queries: np.ndarray, k: int, *, exact: bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Squared L2 distances and indices (both (n_queries, k)) of the ``k`` nearest ``points``."""
    points = np.ascontiguousarray(points, dtype=np.float32)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    if not 1 <= k <= points.shape[0]:
        raise ConfigError(f"k-NN: k={k} must be between 1 and the {points.shape[0]} points.")
    index = _index(points, points.shape[0] <= EXACT_MAX if exact is None else exact, k)
    dists, ids = [], []
    for start in range(0, queries.shape[0], _BLOCK):
        D, I = index.search(queries[start : start + _BLOCK], k)  # noqa: E741 - FAISS's names
        dists.append(D)
        ids.append(I)
    if not ids:
        return np.zeros((0, k), np.float32), np.zeros((0, k), np.int64)
    return np.concatenate(dists), np.concatenate(ids).astype(np.int64)


def knn_graph(X: np.ndarray, k: int, *, exact: bool | None = None) -> np.ndarray:
    """Indices (n, k) of each row's ``k`` nearest other rows (itself excluded).

    Raises
    ------
    ConfigError
        Fewer than ``k + 1`` rows.
    """
    n = X.shape[0]
    if n < k + 1:
        raise ConfigError(
            f"A {k}-nearest-neighbour graph needs at least {k + 1} vectors, got {n}. "
            "Fit on more vectors or lower 'neighbors'."
        )
    _, ids = knn_query(X, X, k + 1, exact=exact)
    # drop the row itself wherever it appears (ties and duplicates can move it off column 0)
    valid = (ids != np.arange(n)[:, None]) & (ids >= 0)
    order = np.argsort(~valid, axis=1, kind="stable")[:, :k]
    out = np.take_along_axis(ids, order, axis=1)
    short = np.flatnonzero(valid.sum(axis=1) < k)
    for i in short:  # HNSW found too few neighbours: pad with the nearest one found
        row = ids[i][valid[i]]
        fill = row[0] if row.size else (i + 1) % n
        out[i] = np.concatenate([row, np.full(k - row.size, fill)])[:k]
    return out
