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

Every source has a fixed row order, so a migration resumes from a row number. A store's folders
and files are read by the source the store declares (its ``reader``, resolved through the store
registry by :func:`slimvec.connectors.store_reader`: FAISS and hnswlib in
:mod:`slimvec.connectors.file_readers`, Qdrant in :mod:`slimvec.connectors.qdrant_readers`);
``.npy`` and Parquet files, which are no store, are read here.

Vector files are untrusted: a ``.npy`` or a Parquet vector column must hold real numbers (float or
integer dtypes; bool, complex, strings, objects, structured and nested lists are refused in one
line before anything is written, and an object ``.npy`` is never unpickled: its dtype is read from
the header). A Parquet file's dimension is the most common vector length of a sample spread over
the file, not row 0's; rows of other lengths are rejected, and a file where no length holds
:data:`DOMINANT_SHARE` of the sample is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.connectors import store_names, store_reader
from slimvec.connectors.reading import SourceBatch, VectorSource, file_fingerprint, require_file, stack_vectors
from slimvec.errors import ConfigError
from slimvec.ids import doc_ids
from slimvec.sources.checks import check_vector_column, check_vector_dtype, npy_dtype, ranked_lengths
from slimvec.sources.readers import SNIPPET, Reject, refuse_duplicate_columns

__all__ = ["SourceBatch", "VectorSource", "open_source", "parse_source", "SOURCE_KINDS"]

log = logging.getLogger(__name__)
#: vector files that are no store, read here; every store reads its own (``store_reader``)
FILE_KINDS = ("npy", "parquet")
SOURCE_KINDS = (*store_names(), *FILE_KINDS)


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
        self.spec, self.path = spec, require_file(path, "vectors file")
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
        return file_fingerprint(self.path)


class ParquetSource(VectorSource):
    """Parquet with an id column and a vector column (list of floats); other columns -> payload."""

    def __init__(self, path: Path, spec: str, id: str = "id", vector: str = "vector") -> None:
        import pyarrow.parquet as pq

        self.spec, self.path = spec, require_file(path, "Parquet file")
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
        from slimvec.sources.parquet_payload import payload_columns
        from slimvec.sources.readers import clean_payload

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
            yield SourceBatch(ids, stack_vectors(vecs, self.dim), payloads, row, rejects, rows)

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
        return file_fingerprint(self.path)


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
    reader = store_reader(kind)  # every store reads its own folders and files
    return reader.from_spec(location, spec, _options(kind, options, reader.source_options))
