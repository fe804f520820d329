"""The store contract shared by Qdrant Edge, Qdrant (qdrant-client), FAISS and hnswlib.

Every store speaks the same conventions, whatever its backend returns:

- ids are stable non-negative 64-bit integers (see :func:`slimvec.ids.doc_id`);
- :meth:`VectorStore.search` returns a :class:`SearchResult` with ``ids`` (n, k) int64 padded with
  ``-1`` and ``scores`` (n, k) float32 where higher is always closer (cosine / inner product
  similarity; negated squared distance for ``l2``), padded with ``-inf``;
- :meth:`VectorStore.upsert` with an existing id overwrites (no duplicates);
- :meth:`VectorStore.size_bytes` is allocated bytes on disk (``st_blocks * 512``) once persisted.
"""

from __future__ import annotations

import abc
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from slimvec.errors import ConfigError, DimensionMismatchError

__all__ = ["SearchResult", "VectorStore", "METRICS", "check_vectors"]

METRICS = ("cosine", "ip", "l2")


@dataclass
class SearchResult:
    """Search output of every store.

    Attributes
    ----------
    ids : ndarray of int64, shape (n_queries, k)
        Store ids, ``-1`` where fewer than k results exist.
    scores : ndarray of float32, shape (n_queries, k)
        Higher is closer; ``-inf`` in padded slots.
    """

    ids: np.ndarray
    scores: np.ndarray

    @classmethod
    def empty(cls, n: int, k: int) -> "SearchResult":
        """All-padding result."""
        return cls(np.full((n, k), -1, dtype=np.int64), np.full((n, k), -np.inf, dtype=np.float32))

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def check_vectors(vectors: Any, dim: int, what: str = "vectors") -> np.ndarray:
    """Return ``vectors`` as float32 (n, dim), raising on a wrong dimension."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ConfigError(f"{what} must be 2-D (n, dim), got shape {arr.shape}.")
    if arr.shape[1] != dim:
        raise DimensionMismatchError(f"{what} for this store", dim, arr.shape[1])
    return np.ascontiguousarray(arr)


class VectorStore(abc.ABC):
    """Abstract vector store.

    Construction only records the location and options; :meth:`create` makes a new empty store
    and :meth:`open` opens an existing one. Stores are context managers.

    Parameters
    ----------
    location : str or path
        Folder (embedded stores) or URL (remote Qdrant).
    **options
        Store-specific options from the spec string.
    """

    #: spec name (``qdrant-edge``, ``qdrant``, ``faiss``, ``hnsw``)
    name: ClassVar[str] = ""
    #: True when the store keeps its data under ``location`` on local disk
    local: ClassVar[bool] = True

    def __init__(self, location: str | os.PathLike[str], **options: Any) -> None:
        self.location = str(location)
        self.options = dict(options)
        self.dim: int | None = None
        self.metric: str = "cosine"

    # -------------------------------------------------------------- lifecycle
    @abc.abstractmethod
    def create(self, dim: int, metric: str = "cosine") -> "VectorStore":
        """Create a new, empty store of vectors of ``dim`` dimensions; returns self."""

    @abc.abstractmethod
    def open(self) -> "VectorStore":
        """Open an existing store at ``location``; returns self."""

    @abc.abstractmethod
    def upsert(self, ids: Sequence[int] | np.ndarray, vectors: np.ndarray,
               payloads: Sequence[dict[str, Any] | None] | None = None) -> None:
        """Insert or overwrite vectors (and payloads) by id."""

    @abc.abstractmethod
    def search(self, queries: np.ndarray, k: int, **params: Any) -> SearchResult:
        """k nearest stored vectors of each query (see module docstring for conventions)."""

    @abc.abstractmethod
    def count(self) -> int:
        """Number of stored vectors."""

    @abc.abstractmethod
    def get_payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        """Payloads of ``ids`` in order (``None`` for unknown ids or ``-1``)."""

    def finalize(self) -> None:
        """Build indexes after a bulk load (Qdrant Edge ``optimize()``); default no-op."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Make everything upserted so far durable on disk (or acknowledged by the server)."""

    def size_bytes(self) -> int:
        """Allocated bytes on disk of the store's files (0 for remote stores)."""
        from slimvec.persistence import allocated_bytes

        return allocated_bytes(self.location) if self.local else 0

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and release resources."""

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable description recorded in the index manifest."""
        return {"name": self.name, "location": self.location, "options": self.options,
                "dim": self.dim, "metric": self.metric}

    def __enter__(self) -> "VectorStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------- helpers
    def _check_metric(self, metric: str) -> str:
        if metric not in METRICS:
            raise ConfigError(f"Unknown metric {metric!r}. Known: {', '.join(METRICS)}.")
        return metric

    @staticmethod
    def _as_ids(ids: Sequence[int] | np.ndarray) -> np.ndarray:
        arr = np.asarray(ids, dtype=np.int64).ravel()
        if (arr < 0).any():
            raise ConfigError("Store ids must be non-negative 64-bit integers (-1 means 'none').")
        return arr

    @staticmethod
    def _folder(location: str) -> Path:
        return Path(location).expanduser()
