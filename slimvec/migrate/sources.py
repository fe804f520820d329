"""Existing vector collections read as a stream of ``(ids, vectors, payloads)`` batches.

A source spec names where the vectors are now:

======================================  ===========================================================
spec                                    source
======================================  ===========================================================
``qdrant:http://host:6333/COLLECTION``  Qdrant server (API key from ``QDRANT_API_KEY``), scrolled
``qdrant:PATH/COLLECTION``              qdrant-client local mode (or ``qdrant:PATH,collection=C``)
``qdrant-edge:PATH``                    Qdrant Edge shard folder (or a slimvec qdrant-edge store)
``faiss:FILE`` / ``FILE.faiss``         FAISS index file (``IndexIDMap`` ids) or a slimvec FAISS
                                        store folder (its ``ids.npy``)
``hnsw:FILE,dim=384,space=cosine``      hnswlib index file (or a slimvec hnsw store folder)
``npy:FILE`` / ``FILE.npy``             (n, d) array, id = row number
``parquet:FILE,id=id,vector=vector``    Parquet with an id and a list-of-floats vector column; the
                                        other columns become the payload
======================================  ===========================================================

Every source has a fixed row order, so a migration resumes from a row number.

Vector files are untrusted: a ``.npy`` or a Parquet vector column must hold real numbers (float or
integer dtypes; bool, complex, strings, objects, structured and nested lists are refused in one
line before anything is written, and an object ``.npy`` is never unpickled: its dtype is read from
the header). A Parquet file's dimension is the most common vector length of a sample spread over
the file, not row 0's; rows of other lengths are rejected, and a file where no length holds
:data:`DOMINANT_SHARE` of the sample is refused.
"""

from __future__ import annotations

import abc
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from slimvec.errors import ConfigError, MissingDependencyError, StoreError
from slimvec.ids import ID_RULE, doc_ids
from slimvec.indexer.checks import check_vector_column, check_vector_dtype, npy_dtype, ranked_lengths
from slimvec.indexer.sources import SNIPPET, Reject, refuse_duplicate_columns

__all__ = ["SourceBatch", "VectorSource", "open_source", "parse_source", "SOURCE_KINDS"]

log = logging.getLogger(__name__)
SOURCE_KINDS = ("qdrant", "qdrant-edge", "faiss", "hnsw", "npy", "parquet")


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

    def __enter__(self) -> "VectorSource":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _file_fingerprint(path: Path) -> dict[str, Any]:
    from slimvec.indexer.progress import fingerprint

    return fingerprint(path)


def _require_file(path: Path, what: str) -> Path:
    if not path.exists():
        raise ConfigError(f"{what} {path} does not exist. Check the --from path.")
    return path


# --------------------------------------------------------------------------- files
#: Share of the sampled vectors the most common length must hold to be taken as the dimension of
#: a source whose rows may differ (Parquet); the other rows become wrong-dimension rejects. Below
#: it the file mixes two collections and is refused (one migration per dimension).
DOMINANT_SHARE = 0.75
_DIM_SAMPLE_GROUPS = 16  # row groups read to find the dominant length (spread over the file)
_DIM_SAMPLE_ROWS = 2048  # first rows of each of those row groups


class NpySource(VectorSource):
    """A 2-D ``.npy`` array read memory-mapped (never with pickle); id = row number."""

    def __init__(self, path: Path, spec: str) -> None:
        self.spec, self.path = spec, _require_file(path, "vectors file")
        check_vector_dtype(npy_dtype(path), f"{path}: dtype")  # before np.load: no object array
        try:
            self._arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise ConfigError(f"{path} is not a readable .npy array: {exc}.") from exc
        if self._arr.ndim != 2:
            raise ConfigError(f"{path}: expected a 2-D (n, dim) array, got shape {self._arr.shape}.")
        self.dim = int(self._arr.shape[1])

    def count(self) -> int:
        return int(self._arr.shape[0])

    def batches(self, start: int, size: int) -> Iterator[SourceBatch]:
        for lo in range(start, self.count(), size):
            hi = min(lo + size, self.count())
            yield SourceBatch(np.arange(lo, hi, dtype=np.int64),
                              np.asarray(self._arr[lo:hi], dtype=np.float32), [{} for _ in range(hi - lo)], hi)

    def take(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(self._arr[np.asarray(rows, dtype=np.int64)], dtype=np.float32)

    def fingerprint(self) -> dict[str, Any]:
        return _file_fingerprint(self.path)


class ParquetSource(VectorSource):
    """Parquet with an id column and a vector column (list of floats); other columns -> payload."""

    def __init__(self, path: Path, spec: str, id: str = "id", vector: str = "vector") -> None:
        import pyarrow.parquet as pq

        self.spec, self.path = spec, _require_file(path, "Parquet file")
        self.id_col, self.vec_col = id, vector
        try:
            self._file = pq.ParquetFile(str(path))
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise ConfigError(f"{path} is not a readable Parquet file: {exc}.") from exc
        names = self._file.schema_arrow.names
        refuse_duplicate_columns(path, list(names))
        missing = [c for c in (id, vector) if c not in names]
        if missing:
            raise ConfigError(f"{path} has no column {missing[0]!r} (columns: {', '.join(names)}). "
                              "Name them with parquet:FILE,id=COLUMN,vector=COLUMN.")
        self._check_vector_type(vector)
        self.dim = self._dominant_dim(vector)
        self._seen: dict[int, int] = {}  # store id -> row, to report repeated ids

    def _check_vector_type(self, vector: str) -> None:
        """Refuse a vector column that is not one flat list of real numbers per row."""
        check_vector_column(self._file.schema_arrow.field(vector).type, f"{self.path}: column {vector!r}",
                            "Name another column with parquet:FILE,vector=COLUMN.")

    def _dominant_dim(self, vector: str) -> int:
        """The most common vector length in a sample spread over the file (not row 0's).

        Reads the first rows of up to ``_DIM_SAMPLE_GROUPS`` row groups evenly spaced over the
        file. Rows of other lengths are rejected as wrong dimension when streamed; when the most
        common length holds less than :data:`DOMINANT_SHARE` of the sampled vectors the file is
        refused (it mixes collections: which one is meant is not ours to guess).
        """
        import pyarrow.compute as pc

        meta = self._file.metadata
        starts = np.concatenate([[0], np.cumsum([meta.row_group(g).num_rows
                                                 for g in range(meta.num_row_groups)])])
        groups = sorted({int(g) for g in np.linspace(0, meta.num_row_groups - 1,
                                                     min(_DIM_SAMPLE_GROUPS, meta.num_row_groups))})
        rows_by_len: dict[int, list[int]] = {}
        for g in groups if meta.num_row_groups else []:
            for rb in self._file.iter_batches(batch_size=_DIM_SAMPLE_ROWS, row_groups=[g],
                                              columns=[vector]):
                lengths = pc.list_value_length(rb.column(0)).to_numpy(zero_copy_only=False)
                for i, n in enumerate(lengths.tolist()):
                    if n == n and n is not None:  # null vectors (NaN here) are rejected later
                        rows_by_len.setdefault(int(n), []).append(int(starts[g]) + i)
                break  # the first batch of each sampled group
        if not rows_by_len:
            return 0
        ranked = ranked_lengths(rows_by_len)
        total = sum(len(r) for _, r in ranked)
        dim, rows = ranked[0]
        if len(ranked) == 1:
            return dim

        def by_length(items: list[tuple[int, list[int]]]) -> str:
            return ", ".join(f"{len(r):,} have {n} values (rows {', '.join(map(str, r[:5]))}"
                             f"{', ...' if len(r) > 5 else ''})" for n, r in items[:4])

        if len(rows) < DOMINANT_SHARE * total:
            raise ConfigError(
                f"{self.path}: column {vector!r} holds vectors of mixed lengths: of {total:,} "
                f"sampled rows, {by_length(ranked)}; no length holds {DOMINANT_SHARE:.0%} of them, "
                "so the file looks like several collections. Split it by vector length and run "
                "one migration per dimension, or fix the rows.")
        log.warning("%s: column %r: %d of %d sampled vectors have %d values; the others are "
                    "rejected as wrong dimension: %s", self.path, vector, len(rows), total, dim,
                    by_length(ranked[1:]))
        return dim

    def count(self) -> int:
        return int(self._file.metadata.num_rows)

    def batches(self, start: int, size: int) -> Iterator[SourceBatch]:
        from slimvec.indexer.parquet_payload import payload_columns
        from slimvec.indexer.sources import clean_payload

        if start == 0:
            self._seen.clear()
        row = 0
        for rb in self._file.iter_batches(batch_size=size):
            lo, row = row, row + rb.num_rows
            if row <= start:
                continue
            cut = max(0, start - lo)
            rb, suspects = payload_columns(rb.slice(cut), self.path,
                                           keep=(self.id_col, self.vec_col))
            table = rb.to_pydict()
            first = lo + cut
            raw_vecs = table.pop(self.vec_col)
            raw_ids = table.pop(self.id_col)
            rest = list(table)
            keep: list[int] = []
            rejects: list[Reject] = []
            for i, rid in enumerate(raw_ids):
                if rid is None or (isinstance(rid, float) and rid != rid) or (
                        isinstance(rid, str) and not rid.strip()):
                    rejects.append(Reject(self.spec, first + i, None, self.id_col, "missing id",
                                          repr(rid)[:SNIPPET]))
                else:
                    keep.append(i)
            ids = doc_ids([raw_ids[i] for i in keep], self.id_rule)
            payloads = []
            for j, i in enumerate(keep):
                pl = {c: table[c][i] for c in rest}
                if suspects:
                    notes: list[str] = []
                    pl = clean_payload(pl, suspects, notes)
                    rejects.extend(Reject(self.spec, first + i, None, None, n, "", kept=True)
                                   for n in notes)
                payloads.append(pl)
                sid = int(ids[j])
                prev = self._seen.get(sid)
                if prev is not None and prev != first + i:
                    rejects.append(Reject(
                        self.spec, first + i, None, self.id_col,
                        f"duplicate id {raw_ids[i]!r} of row {prev}: last wins (this row replaces "
                        "it)", repr(raw_ids[i])[:SNIPPET], kept=True))
                self._seen[sid] = first + i
            vecs = [np.asarray(raw_vecs[i], dtype=np.float32) if raw_vecs[i] is not None
                    else np.full(self.dim, np.nan, np.float32) for i in keep]
            rows = [first + i for i in keep] if len(keep) != len(raw_ids) else None
            yield SourceBatch(ids, _stack(vecs, self.dim), payloads, row, rejects, rows)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Vectors of the given sorted rows, read from the vector column alone (a wrong-dimension
        or null vector becomes NaN: left out of the fit sample, rejected when streamed)."""
        wanted = np.asarray(rows, dtype=np.int64)
        out = np.full((len(wanted), self.dim), np.nan, dtype=np.float32)
        j, lo = 0, 0
        for rb in self._file.iter_batches(batch_size=4096, columns=[self.vec_col]):
            hi = lo + rb.num_rows
            col = rb.column(0)
            while j < len(wanted) and wanted[j] < hi:
                v = col[int(wanted[j] - lo)].as_py()
                if v is not None and len(v) == self.dim:
                    out[j] = np.asarray(v, dtype=np.float32)
                j += 1
            lo = hi
            if j == len(wanted):
                break
        return out

    def fingerprint(self) -> dict[str, Any]:
        return _file_fingerprint(self.path)


def _stack(vecs: list[np.ndarray], dim: int) -> Any:
    """(n, dim) float32 when every row has ``dim`` values, else the list (bad rows are rejected later)."""
    if all(v.shape == (dim,) for v in vecs):
        return np.stack(vecs).astype(np.float32) if vecs else np.empty((0, dim), np.float32)
    return vecs


class FaissSource(VectorSource):
    """A FAISS index file (ids from an ``IndexIDMap``) or a slimvec FAISS store folder."""

    def __init__(self, path: Path, spec: str) -> None:
        import faiss

        self.spec = spec
        path = _require_file(path, "FAISS index")
        self.path = path / "index.faiss" if path.is_dir() else path
        try:
            index = faiss.read_index(str(self.path))
        except RuntimeError as exc:
            raise ConfigError(f"{self.path} is not a readable FAISS index: {exc}.") from exc
        ids: np.ndarray | None = None
        self._payloads = _payload_table(path)
        if path.is_dir():
            ids = np.load(path / "ids.npy", allow_pickle=False).astype(np.int64)
            self.metric = _store_metric(path, "faiss")
        elif isinstance(index, (faiss.IndexIDMap, faiss.IndexIDMap2)) or hasattr(index, "id_map"):
            self._owner = index  # owns the inner index (wrappers below do not): keep it alive
            self._outer = faiss.downcast_index(index)
            ids = faiss.vector_to_array(self._outer.id_map).astype(np.int64)
            index = faiss.downcast_index(self._outer.index)
        if ids is None:
            ids = np.arange(index.ntotal, dtype=np.int64)
        if len(ids) != index.ntotal:
            raise StoreError(f"{self.path}: {index.ntotal} vectors but {len(ids)} ids.")
        if self.metric is None:
            self.metric = {faiss.METRIC_L2: "l2", faiss.METRIC_INNER_PRODUCT: "ip"}.get(
                int(index.metric_type))
            if self.metric is None:
                raise ConfigError(f"{self.path}: FAISS metric type {index.metric_type} is neither L2 "
                                  "nor inner product; slimvec indexes by cosine, ip or l2 only.")
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:  # IVF lists need a direct map to return vectors by position
            ivf.make_direct_map()
        # a slimvec store keeps replaced copies: the last position of each id wins
        _, last = np.unique(ids[::-1], return_index=True)
        self._positions = np.sort(len(ids) - 1 - last)
        self._ids, self._index = ids, index
        self.dim = int(index.d)

    def count(self) -> int:
        return int(len(self._positions))

    def _vectors(self, positions: np.ndarray) -> np.ndarray:
        out = np.empty((len(positions), self.dim), dtype=np.float32)
        for j, p in enumerate(positions.tolist()):
            try:
                out[j] = self._index.reconstruct(int(p))
            except RuntimeError as exc:
                raise StoreError(f"{self.path}: this FAISS index cannot return its vectors "
                                 f"(reconstruct failed: {str(exc).strip().splitlines()[-1]}). Export "
                                 "the vectors to .npy from the original data instead.") from exc
        return out

    def batches(self, start: int, size: int) -> Iterator[SourceBatch]:
        for lo in range(start, self.count(), size):
            pos = self._positions[lo:lo + size]
            ids = self._ids[pos]
            yield SourceBatch(ids, self._vectors(pos), _payloads_of(self._payloads, ids), lo + len(pos))

    def take(self, rows: np.ndarray) -> np.ndarray:
        return self._vectors(self._positions[np.asarray(rows, dtype=np.int64)])

    def fingerprint(self) -> dict[str, Any]:
        return _file_fingerprint(self.path)


class HnswSource(VectorSource):
    """An hnswlib index file (``dim`` and ``space`` must be given) or a slimvec hnsw store folder."""

    def __init__(self, path: Path, spec: str, dim: int | None = None, space: str = "cosine") -> None:
        import hnswlib

        self.spec = spec
        path = _require_file(path, "hnswlib index")
        self._payloads = _payload_table(path)
        if path.is_dir():
            from slimvec.connectors.storefiles import read_meta

            meta = read_meta(path, "hnsw")
            dim, space, path = int(meta["dim"]), meta["metric"], path / "index.hnsw"
        if not dim:
            raise ConfigError(f"An hnswlib file does not record its dimension: pass it, e.g. "
                              f"hnsw:{path},dim=384,space=cosine.")
        if space not in ("cosine", "ip", "l2"):
            raise ConfigError(f"hnsw space {space!r} unknown. Known: cosine, ip, l2.")
        self.path, self.dim, self.metric = path, int(dim), space
        self._index = hnswlib.Index(space=space, dim=self.dim)
        try:
            self._index.load_index(str(path))
        except RuntimeError as exc:
            raise ConfigError(f"{path} is not a readable hnswlib index of dimension {dim}: {exc}.") from exc
        self._labels = np.sort(np.asarray(self._index.get_ids_list(), dtype=np.int64))

    def count(self) -> int:
        return int(len(self._labels))

    def batches(self, start: int, size: int) -> Iterator[SourceBatch]:
        for lo in range(start, self.count(), size):
            labels = self._labels[lo:lo + size]
            yield SourceBatch(labels.copy(), self._get(labels), _payloads_of(self._payloads, labels),
                              lo + len(labels))

    def _get(self, labels: np.ndarray) -> np.ndarray:
        return np.asarray(self._index.get_items(labels.tolist()), dtype=np.float32).reshape(-1, self.dim)

    def take(self, rows: np.ndarray) -> np.ndarray:
        return self._get(self._labels[np.asarray(rows, dtype=np.int64)])

    def fingerprint(self) -> dict[str, Any]:
        return _file_fingerprint(self.path)


def _store_metric(folder: Path, kind: str) -> str | None:
    """The metric a slimvec store folder recorded at create (``None``: not a store folder)."""
    from slimvec.connectors.storefiles import META_FILE, read_meta

    return str(read_meta(folder, kind)["metric"]) if (folder / META_FILE).is_file() else None


def _payload_table(path: Path) -> Any:
    """The payload side table of a slimvec FAISS / hnsw store folder (``None`` for bare files)."""
    if path.is_dir() and (path / "payloads.sqlite").exists():
        from slimvec.connectors.payloads import PayloadTable

        return PayloadTable(path / "payloads.sqlite")
    return None


def _payloads_of(table: Any, ids: np.ndarray) -> list[dict[str, Any]]:
    if table is None:
        return [{} for _ in range(len(ids))]
    return [p or {} for p in table.get(ids.tolist())]


# --------------------------------------------------------------------------- Qdrant
def _point_vector(vector: Any, name: str | None, where: str) -> list[float] | None:
    """The chosen vector of a point; ``None`` when the point lacks it (a reject, not a crash)."""
    if isinstance(vector, dict):
        if name is None and len(vector) <= 1:
            return list(next(iter(vector.values()))) if vector else None
        if name is None:
            raise ConfigError(f"{where} has named vectors ({', '.join(vector)}): choose one with "
                              ",vector=NAME in the --from spec.")
        return list(vector[name]) if vector.get(name) is not None else None
    if vector is None:
        return None
    return list(vector)


class _ScrollSource(VectorSource):
    """Common scrolling of Qdrant points ordered by id; resuming skips rows without vectors."""

    vector_name: str | None = None

    @abc.abstractmethod
    def _scroll(self, offset: Any, limit: int, with_data: bool) -> tuple[list[Any], Any]:
        """One page: records and the next offset (None at the end)."""

    def _scan_dim(self, limit: int = 4096) -> int:
        """Length of the chosen vector of the first point that has it (the engine enforces one
        size per vector name; a first point without the named vector must not make it 0)."""
        offset, seen = None, 0
        while seen < limit:
            page, offset = self._scroll(offset, 256, True)
            for p in page:
                vec = _point_vector(p.vector, self.vector_name, self.spec)
                if vec is not None:
                    return len(vec)
            seen += len(page)
            if offset is None or not page:
                break
        return 0

    def batches(self, start: int, size: int) -> Iterator[SourceBatch]:
        offset, row = None, 0
        while row < start:  # skip committed rows cheaply (ids only)
            page, offset = self._scroll(offset, min(size * 4, start - row), False)
            row += len(page)
            if offset is None or not page:
                return
        while True:
            page, offset = self._scroll(offset, size, True)
            if not page:
                return
            row += len(page)
            first = row - len(page)
            vecs, payloads, raw_ids, kept_rows, rejects = [], [], [], [], []
            for j, p in enumerate(page):
                vec = _point_vector(p.vector, self.vector_name, self.spec)
                if vec is None:  # e.g. a point without the chosen named vector
                    rejects.append(Reject(self.spec, first + j, None, "vector",
                                          f"point {p.id} has no vector"
                                          f"{f' {self.vector_name!r}' if self.vector_name else ''}",
                                          ""))
                    continue
                vecs.append(np.asarray(vec, np.float32))
                pl = dict(p.payload or {})
                if not isinstance(p.id, int):
                    pl.setdefault("source_id", str(p.id))  # UUID ids are hashed: keep the original
                payloads.append(pl)
                raw_ids.append(p.id)
                kept_rows.append(first + j)
            ids = doc_ids([i if isinstance(i, int) else str(i) for i in raw_ids], self.id_rule)
            yield SourceBatch(ids, _stack(vecs, self.dim), payloads, row, rejects,
                              kept_rows if rejects else None)
            if offset is None:
                return


class QdrantEdgeSource(_ScrollSource):
    """A Qdrant Edge shard folder (or a slimvec qdrant-edge store folder holding ``shard/``)."""

    def __init__(self, path: Path, spec: str, vector: str | None = None) -> None:
        import qdrant_edge as q

        self.spec, self._q, self.vector_name = spec, q, vector
        path = _require_file(path, "Qdrant Edge shard")
        if (path / "shard").is_dir():
            self.metric = _store_metric(path, "qdrant-edge")
            path = path / "shard"
        try:
            self._shard = q.EdgeShard.load(str(path))
        except Exception as exc:  # the engine raises its own types
            raise ConfigError(f"{path} is not a loadable Qdrant Edge shard: {exc}.") from exc
        self.path = path
        self.dim = self._scan_dim()  # Qdrant Edge does not expose its vector config

    def _scroll(self, offset: Any, limit: int, with_data: bool) -> tuple[list[Any], Any]:
        q = self._q
        return self._shard.scroll(q.ScrollRequest(offset=offset, limit=int(limit),
                                                  with_payload=with_data, with_vector=with_data))

    def count(self) -> int:
        return int(self._shard.count(self._q.CountRequest(exact=True)))

    def close(self) -> None:
        if self._shard is not None:
            self._shard.close()
            self._shard = None


class QdrantSource(_ScrollSource):
    """A Qdrant collection through qdrant-client: server URL (``QDRANT_API_KEY``) or local folder."""

    def __init__(self, location: str, collection: str, spec: str, vector: str | None = None) -> None:
        try:
            from qdrant_client import QdrantClient
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise MissingDependencyError("qdrant-client is not installed: pip install qdrant-client") from exc
        self.spec, self.collection, self.vector_name = spec, collection, vector
        if location.startswith(("http://", "https://")):
            self._client = QdrantClient(url=location, api_key=os.environ.get("QDRANT_API_KEY"))
        else:
            _require_file(Path(location), "qdrant-client local folder")
            self._client = QdrantClient(path=location)
        if not self._client.collection_exists(collection):
            names = [c.name for c in self._client.get_collections().collections]
            self._client.close()
            raise ConfigError(f"No collection {collection!r} at {location} (collections: "
                              f"{', '.join(names) or 'none'}).")
        self.dim = self._config_dim(location) or self._scan_dim()

    def _config_dim(self, location: str) -> int:
        """The chosen vector's size from the collection config (not from the first point)."""
        try:
            params = self._client.get_collection(self.collection).config.params.vectors
        except Exception as exc:  # noqa: BLE001 - the client raises transport-specific types
            log.debug("no vector config for %s at %s: %s", self.collection, location, exc)
            return 0
        if not isinstance(params, dict):
            self.metric = _qdrant_metric(params)
            return int(getattr(params, "size", 0) or 0)
        sizes = ", ".join(f"{n or '(unnamed)'} ({getattr(v, 'size', '?')})" for n, v in params.items())
        name = self.vector_name
        if name is None and len(params) == 1:
            name = self.vector_name = next(iter(params))
        if name is None:
            self._client.close()
            raise ConfigError(f"{self.spec}: collection {self.collection!r} has named vectors "
                              f"{sizes}: choose one with ,vector=NAME in the --from spec.")
        if name not in params:
            self._client.close()
            raise ConfigError(f"{self.spec}: collection {self.collection!r} has no vector "
                              f"{name!r}; its vectors: {sizes}. Name one of them with ,vector=NAME.")
        self.metric = _qdrant_metric(params[name])
        return int(params[name].size)

    def _scroll(self, offset: Any, limit: int, with_data: bool) -> tuple[list[Any], Any]:
        vectors: Any = with_data if not (with_data and self.vector_name) else [self.vector_name]
        return self._client.scroll(self.collection, limit=int(limit), offset=offset,
                                   with_payload=with_data, with_vectors=vectors)

    def count(self) -> int:
        return int(self._client.count(self.collection, exact=True).count)

    def close(self) -> None:
        self._client.close()


def _qdrant_metric(params: Any) -> str | None:
    """cosine / ip / l2 of a Qdrant vector config; another distance (Manhattan) by its own name,
    refused by the migration unless ``metric`` is named."""
    distance = str(getattr(getattr(params, "distance", None), "value", ""))
    return {"Cosine": "cosine", "Dot": "ip", "Euclid": "l2"}.get(distance, distance.lower() or None)


# --------------------------------------------------------------------------- specs
def parse_source(spec: str) -> tuple[str, str, dict[str, str]]:
    """Split ``KIND:LOCATION,key=value,...`` into kind, location and options.

    Without a known ``KIND:`` prefix the kind comes from the file: ``.npy``, ``.parquet``,
    ``.faiss`` / ``.index``, or a slimvec store folder (its ``slimvec_store.json``).
    """
    text = spec.strip()
    kind, sep, rest = text.partition(":")
    if not sep or kind.lower() not in SOURCE_KINDS:
        kind, rest = "", text
    parts = rest.split(",")
    location, options = parts[0], {}
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        if not eq:
            raise ConfigError(f"--from {spec!r}: expected key=value after the location, got {part!r}.")
        options[key.strip()] = value.strip()
    if not kind:
        kind = _infer_kind(Path(location), spec)
    return kind.lower(), location, options


def _infer_kind(path: Path, spec: str) -> str:
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return "npy"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".faiss", ".index"):
        return "faiss"
    if path.is_dir() and (path / "slimvec_store.json").exists():
        from slimvec.persistence import read_json

        name = str(read_json(path / "slimvec_store.json").get("store"))
        if name in SOURCE_KINDS:  # a slimvec store folder is read by the source of the same kind
            return name
    raise ConfigError(f"Cannot tell what kind of source --from {spec!r} is. Prefix it: "
                      "qdrant:URL/COLLECTION, qdrant-edge:PATH, faiss:FILE, "
                      "hnsw:FILE,dim=384,space=cosine, npy:FILE or parquet:FILE,id=id,vector=vector.")


def _options(kind: str, options: dict[str, str], allowed: tuple[str, ...]) -> dict[str, str]:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"Unknown option {unknown[0]!r} for a {kind} source. Known: "
                          f"{', '.join(allowed) or 'none'}.")
    return options


def open_source(spec: str) -> VectorSource:
    """Open the collection a source spec names (see the module docstring).

    Raises
    ------
    ConfigError
        Unknown kind or option, a missing file, a collection that does not exist.
    """
    kind, location, options = parse_source(spec)
    path = Path(location).expanduser()
    if kind == "npy":
        _options(kind, options, ())
        return NpySource(path, spec)
    if kind == "parquet":
        return ParquetSource(path, spec, **_options(kind, options, ("id", "vector")))
    if kind == "faiss":
        _options(kind, options, ())
        return FaissSource(path, spec)
    if kind == "hnsw":
        opts = _options(kind, options, ("dim", "space"))
        return HnswSource(path, spec, int(opts["dim"]) if "dim" in opts else None,
                          opts.get("space", "cosine"))
    if kind == "qdrant-edge":
        return QdrantEdgeSource(path, spec, **_options(kind, options, ("vector",)))
    opts = _options(kind, options, ("collection", "vector"))
    collection = opts.get("collection")
    if collection is None:
        location, _, collection = location.rstrip("/").rpartition("/")
        if not location or not collection:
            raise ConfigError(f"--from {spec!r}: name the collection, e.g. qdrant:http://host:6333/"
                              "docs or qdrant:PATH,collection=docs.")
    return QdrantSource(location, collection, spec, opts.get("vector"))
