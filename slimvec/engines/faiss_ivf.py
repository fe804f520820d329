"""FAISS IVF built in parallel the way FAISS builds billion-scale indexes.

1. train the IVF (and PQ / OPQ) once, on a sample of *reduced* vectors, giving an empty trained
   index;
2. each worker deserializes a copy of the trained empty index and adds its share of the vectors
   with their global positions as ids (``add_with_ids``);
3. the driver merges the inverted lists of the shards into the trained index
   (``IndexIVF.merge_from``, the in-memory form of ``faiss.contrib.ondisk.merge_ondisk``), in
   shard order, so the lists equal those of one process adding everything in the same order.

Indexes cross process boundaries as ``faiss.serialize_index`` bytes (FAISS's own format), never
pickles. Workers are Ray tasks when Ray is running (:func:`build_ivf_parallel`), else a local
loop over the same function.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from slimvec.errors import ConfigError

__all__ = ["train_ivf", "add_shard", "merge_shards", "build_ivf_parallel", "ivf_lists"]

log = logging.getLogger(__name__)


def _faiss() -> Any:
    import faiss

    return faiss


def _ivf(index: Any) -> Any:
    faiss = _faiss()
    try:
        return faiss.extract_index_ivf(index)
    except RuntimeError as exc:
        raise ConfigError(f"FAISS index {type(index).__name__} has no inverted lists: the parallel "
                          "build needs an IVF factory (IVF1024,PQ16, OPQ16,IVF256,PQ16, IVF256,Flat).") from exc


def train_ivf(factory: str, sample: np.ndarray, metric: str = "cosine") -> np.ndarray:
    """Train ``factory`` on ``sample`` (reduced vectors); returns the serialized empty index.

    ``cosine`` normalises (inner product on unit vectors), ``ip`` and ``l2`` use the vectors as
    they are.
    """
    faiss = _faiss()
    X = np.ascontiguousarray(sample, dtype=np.float32)
    if metric == "cosine":
        X = X.copy()
        faiss.normalize_L2(X)
    kind = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
    index = faiss.index_factory(X.shape[1], factory, kind)
    _ivf(index)
    from slimvec.ui import quiet_faiss

    with quiet_faiss():  # its clustering warnings are counted, not printed
        index.train(X)
    return faiss.serialize_index(index)


def add_shard(trained: np.ndarray, positions: np.ndarray, vectors: np.ndarray,
              metric: str = "cosine") -> np.ndarray:
    """Worker step: add ``vectors`` with ids ``positions`` to a copy of the trained empty index."""
    faiss = _faiss()
    index = faiss.deserialize_index(np.asarray(trained))
    X = np.ascontiguousarray(vectors, dtype=np.float32)
    if metric == "cosine":
        X = X.copy()
        faiss.normalize_L2(X)
    index.add_with_ids(X, np.ascontiguousarray(positions, dtype=np.int64))
    return faiss.serialize_index(index)


def merge_shards(trained: np.ndarray, shards: Sequence[np.ndarray]) -> Any:
    """Merge the inverted lists of ``shards`` (in order) into the trained empty index."""
    faiss = _faiss()
    merged = faiss.deserialize_index(np.asarray(trained))
    target = _ivf(merged)
    for data in shards:
        part = faiss.deserialize_index(np.asarray(data))
        target.merge_from(_ivf(part), 0)  # add_id=0: the shards already carry global ids
    merged.ntotal = target.ntotal
    return merged


def build_ivf_parallel(trained: np.ndarray, vectors: np.ndarray, workers: int = 2,
                       metric: str = "cosine") -> Any:
    """Split ``vectors`` into ``workers`` contiguous shards, add them in parallel, merge.

    Ids are the row positions of ``vectors``. Uses Ray tasks when a Ray runtime is initialised
    (vectors are shipped through the object store), a local loop otherwise.
    """
    bounds = np.linspace(0, len(vectors), max(1, int(workers)) + 1).astype(int)
    shards = [(np.arange(a, b, dtype=np.int64), vectors[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    try:
        import ray
        running = ray.is_initialized()
    except ImportError:
        running = False
    if running:
        remote = ray.remote(num_cpus=1)(add_shard)
        trained_ref = ray.put(trained)
        parts = ray.get([remote.remote(trained_ref, pos, vec, metric) for pos, vec in shards])
    else:
        parts = [add_shard(trained, pos, vec, metric) for pos, vec in shards]
    return merge_shards(trained, parts)


def ivf_lists(index: Any) -> list[tuple[np.ndarray, bytes]]:
    """Every inverted list as (ids, code bytes), to compare two builds exactly."""
    faiss = _faiss()
    ivf = _ivf(index)
    invlists = ivf.invlists
    out = []
    for lst in range(ivf.nlist):
        n = invlists.list_size(lst)
        ids = faiss.rev_swig_ptr(invlists.get_ids(lst), n).copy() if n else np.empty(0, np.int64)
        codes = (faiss.rev_swig_ptr(invlists.get_codes(lst), n * invlists.code_size).tobytes()
                 if n else b"")
        out.append((ids, codes))
    return out
