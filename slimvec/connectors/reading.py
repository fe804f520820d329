"""Reading an existing collection as a stream of ``(ids, vectors, payloads)`` batches.

:class:`VectorSource` is what ``slimvec migrate --from SPEC`` reads. Each store declares the
source that reads its own folders and files (its ``reader`` capability, see
:func:`slimvec.connectors.store_reader`), so the migrate command dispatches through the store
registry; vector files that are no store (``.npy``, Parquet) are read by
:mod:`slimvec.migrate.sources`. Every source has a fixed row order, so a migration resumes from
a row number.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from slimvec.documents import Reject
from slimvec.errors import ConfigError
from slimvec.ids import ID_RULE

__all__ = ["SourceBatch", "VectorSource", "file_fingerprint", "require_file", "stack_vectors",
           "store_metric", "payload_table", "payloads_of"]


@dataclass
class SourceBatch:
    """Rows ``[start, start + len(ids))`` of a source.

    Attributes
    ----------
    ids : ndarray of int64
        Store ids (integer source ids kept as they are, strings / UUIDs hashed).
    vectors : ndarray of float32, shape (n, dim)
    payloads : list of dict
    next_row : int
        First row after this batch.
    rejects : list of Reject
        Rows of the batch left out (e.g. a null id) or kept with a warning (a repeated id).
    rows : list of int or None
        Source row of each kept id when some rows were left out (``None``: consecutive).
    """

    ids: np.ndarray
    vectors: np.ndarray
    payloads: list[dict[str, Any]]
    next_row: int
    rejects: list[Reject] = field(default_factory=list)
    rows: list[int] | None = None


class VectorSource(abc.ABC):
    """An existing collection of vectors, read in a fixed row order.

    Attributes
    ----------
    spec : str
        The source spec as given.
    dim : int
        Vector dimension.
    metric : str or None
        What the source compares its vectors by (``cosine``, ``ip``, ``l2``) when it records it
        (an hnswlib space, a FAISS metric type, a Qdrant distance, a slimvec store's metadata);
        ``None``: it does not say (``.npy``, Parquet, a bare Qdrant Edge shard).
    """

    spec: str = ""
    dim: int = 0
    metric: str | None = None
    id_rule: int = ID_RULE  # set to an existing index's rule before reading batches
    #: the ``key=value`` options its source spec accepts (``hnsw:FILE,dim=384,space=cosine``)
    source_options: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_spec(cls, location: str, spec: str, options: dict[str, str]) -> VectorSource:
        """Open the source a spec names: ``location`` is the part after ``KIND:`` and before the
        first comma, ``options`` the checked ``key=value`` pairs after it (keys of
        :attr:`source_options`), ``spec`` the whole spec as given (named in messages).

        Raises
        ------
        ConfigError
            A missing file or collection, an option of the wrong type.
        """
        raise ConfigError(f"{cls.__name__} cannot be opened from a source spec ({spec!r}).")

    @abc.abstractmethod
    def count(self) -> int:
        """Number of vectors (rows)."""

    @abc.abstractmethod
    def batches(self, start: int, size: int) -> Iterator[SourceBatch]:
        """Batches of ``size`` rows from row ``start`` to the end."""

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Vectors of the given sorted row numbers (default: one streaming pass)."""
        wanted = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(wanted), self.dim), dtype=np.float32)
        j = 0
        for batch in self.batches(0, 2048):
            lo = batch.next_row - len(batch.ids)
            while j < len(wanted) and wanted[j] < batch.next_row:
                v = np.asarray(batch.vectors[wanted[j] - lo], dtype=np.float32).ravel()
                # a wrong-dimension row becomes NaN here (left out of the fit sample) and is
                # rejected with both dimensions when the batches are streamed
                out[j] = v if v.shape == (self.dim,) else np.nan
                j += 1
            if j == len(wanted):
                break
        return out

    def sample(self, n: int, seed: int = 0) -> np.ndarray:
        """Uniform sample of up to ``n`` vectors (without replacement), for fitting a reducer."""
        total = self.count()
        rng = np.random.default_rng(seed)
        rows = np.sort(rng.choice(total, size=min(n, total), replace=False)) if total else np.array([], np.int64)
        return self.take(rows)

    def fingerprint(self) -> dict[str, Any]:
        """What identifies this source's content for resuming (file fingerprint or count)."""
        return {"size": self.count(), "mtime_ns": 0, "head_sha256": "", "tail_sha256": ""}

    def close(self) -> None:
        """Release the source."""

    def __enter__(self) -> VectorSource:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def file_fingerprint(path: Path) -> dict[str, Any]:
    """What identifies a source file's content for resuming (size, mtime, head and tail hashes)."""
    from slimvec.documents import fingerprint

    return fingerprint(path)


def require_file(path: Path, what: str) -> Path:
    """``path``, or a :class:`ConfigError` naming ``what`` is missing."""
    if not path.exists():
        raise ConfigError(f"{what} {path} does not exist. Check the --from path.")
    return path


def stack_vectors(vecs: list[np.ndarray], dim: int) -> Any:
    """(n, dim) float32 when every row has ``dim`` values, else the list (bad rows are rejected later)."""
    if all(v.shape == (dim,) for v in vecs):
        return np.stack(vecs).astype(np.float32) if vecs else np.empty((0, dim), np.float32)
    return vecs


def store_metric(folder: Path, kind: str) -> str | None:
    """The metric a slimvec store folder recorded at create (``None``: not a store folder)."""
    from slimvec.connectors.storefiles import META_FILE, read_meta

    return str(read_meta(folder, kind)["metric"]) if (folder / META_FILE).is_file() else None


def payload_table(path: Path) -> Any:
    """The payload side table of a slimvec FAISS / hnsw store folder (``None`` for bare files)."""
    if path.is_dir() and (path / "payloads.sqlite").exists():
        from slimvec.connectors.payloads import PayloadTable

        return PayloadTable(path / "payloads.sqlite")
    return None


def payloads_of(table: Any, ids: np.ndarray) -> list[dict[str, Any]]:
    """Payloads of ``ids`` from a payload table (``{}`` where none, or without a table)."""
    if table is None:
        return [{} for _ in range(len(ids))]
    return [p or {} for p in table.get(ids.tolist())]
