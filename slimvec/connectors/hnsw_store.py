"""hnswlib: an HNSW graph in one file, capacity grown as needed, payloads in SQLite.

Spec: ``hnsw[:M=16,ef_construction=200,ef=64,threads=0]``. Upserting an existing id replaces its
vector in place (hnswlib updates labels it already holds).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from slimvec.connectors.storefiles import META_FILE, read_meta, write_file_atomic, write_meta
from slimvec.connectors.base import SearchResult, VectorStore, check_vectors
from slimvec.connectors.options import MAX_DIM, check_options, whole
from slimvec.connectors.payloads import PayloadTable
from slimvec.errors import MissingDependencyError, StoreError

__all__ = ["HnswStore"]

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {"M": 16, "ef_construction": 200, "ef": 64, "threads": 0}
#: ranges checked when the spec is parsed. hnswlib itself checks none: M=0 dies in a segmentation
#: fault at the first insert, M=1 fails to allocate its link lists, a negative M is a TypeError
#: deep in pybind11; a huge M allocates 8*M bytes per element at once.
RULES = {
    "M": whole(2, 512, "hnswlib crashes below 2 (M=0 is a segmentation fault) and allocates "
                       "8*M bytes of links per vector; 12-48 is usual (default 16)."),
    "ef_construction": whole(1, 4096, "The build beam; 100-400 is usual (default 200)."),
    "ef": whole(1, 100_000, "The search beam, raised to k when k is larger (default 64)."),
    "threads": whole(0, 1024, "0 uses every core."),
}
INDEX_FILE = "index.hnsw"
_INITIAL_CAPACITY = 1024


def _hnswlib():
    try:
        import hnswlib
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise MissingDependencyError("hnswlib is not installed: pip install hnswlib") from exc
    return hnswlib


class HnswStore(VectorStore):
    """An hnswlib index in ``location/index.hnsw``.

    Parameters
    ----------
    location : str or path
        Folder of the index files.
    M : int
        Graph degree.
    ef_construction : int
        Build beam width.
    ef : int
        Search beam width (raised to k when k is larger).
    threads : int
        Threads for add and query (0 = all cores).
    """

    name = "hnsw"
    spec_arg = None  # the data always goes in the index folder
    snapshot_files = (INDEX_FILE, META_FILE, "payloads.sqlite")
    resident_components = frozenset({"index"})

    @classmethod
    def _component(cls, rel: str) -> str:
        return "index" if rel.rsplit("/", 1)[-1].startswith(INDEX_FILE) else "other"

    @classmethod
    def dim_problem(cls, arg: str | None, options: Mapping[str, Any], dim: int) -> str | None:
        """A dimension outside 1..65536 (the limit every store shares)."""
        if not 1 <= int(dim) <= MAX_DIM:
            return f"hnswlib vectors must have 1 to {MAX_DIM} dimensions, got {dim}"
        return None

    def __init__(self, location: str, **options: Any) -> None:
        super().__init__(location, **check_options(self.name, options, DEFAULTS, RULES))
        self._index = None
        self._payloads: PayloadTable | None = None

    def _space(self) -> str:
        return {"cosine": "cosine", "ip": "ip", "l2": "l2"}[self.metric]

    def create(self, dim: int, metric: str = "cosine") -> "HnswStore":
        hnswlib = _hnswlib()
        self.dim, self.metric = int(dim), self._check_metric(metric)
        folder = self._folder(self.location)
        if (folder / META_FILE).exists():
            raise StoreError(f"A store already exists at {folder}; open it instead or choose an empty folder.")
        folder.mkdir(parents=True, exist_ok=True)
        self._index = hnswlib.Index(space=self._space(), dim=self.dim)
        self._index.init_index(max_elements=_INITIAL_CAPACITY, M=int(self.options["M"]),
                               ef_construction=int(self.options["ef_construction"]))
        self._configure()
        self._payloads = PayloadTable(folder / "payloads.sqlite")
        write_meta(folder, self.name, self.dim, self.metric, self.options)
        self.flush()
        return self

    def open(self) -> "HnswStore":
        hnswlib = _hnswlib()
        folder = self._folder(self.location)
        meta = read_meta(folder, self.name)
        self.dim, self.metric = int(meta["dim"]), meta["metric"]
        search_time = {k: v for k, v in self.options.items() if k in ("ef", "threads") and v != DEFAULTS[k]}
        self.options = {**meta["options"], **search_time}
        self._index = hnswlib.Index(space=self._space(), dim=self.dim)
        _check_file_dim(folder / INDEX_FILE, self.dim)
        try:
            self._index.load_index(str(folder / INDEX_FILE))
        except RuntimeError as exc:
            raise StoreError(f"Could not read the hnswlib index {folder / INDEX_FILE}: {exc}") from exc
        self._configure()
        self._payloads = PayloadTable(folder / "payloads.sqlite")
        self._dirty = False  # a reader's close() must not rewrite the files
        return self

    def _configure(self) -> None:
        assert self._index is not None
        self._index.set_ef(int(self.options["ef"]))
        threads = int(self.options["threads"])
        self._index.set_num_threads(threads if threads > 0 else -1)

    def _require(self):
        if self._index is None:
            raise StoreError(f"hnswlib store at {self.location} is not open: call create() or open().")
        return self._index

    def upsert(self, ids: Sequence[int] | np.ndarray, vectors: np.ndarray,
               payloads: Sequence[dict[str, Any] | None] | None = None) -> None:
        index = self._require()
        self._dirty = True
        ids_arr = self._as_ids(ids)
        vecs = check_vectors(vectors, self.dim or 0)
        if len(ids_arr) != len(vecs):
            raise StoreError(f"upsert got {len(ids_arr)} ids for {len(vecs)} vectors.")
        rows = None
        if payloads is not None:  # encoded before any vector is added: all or nothing
            assert self._payloads is not None
            rows = self._payloads.encode(ids_arr.tolist(), list(payloads))
        needed = index.get_current_count() + len(ids_arr)
        capacity = index.get_max_elements()
        if needed > capacity:
            new_capacity = max(needed, 2 * capacity)
            log.debug("growing hnswlib capacity %d -> %d", capacity, new_capacity)
            index.resize_index(new_capacity)
        index.add_items(vecs, ids_arr.astype(np.uint64))
        if rows is not None:
            assert self._payloads is not None
            self._payloads.put_rows(rows)

    def search(self, queries: np.ndarray, k: int, **params: Any) -> SearchResult:
        index = self._require()
        check_options(self.name, params, DEFAULTS, RULES)
        qs = check_vectors(queries, self.dim or 0, "queries")
        k = self._capped(k)
        out = SearchResult.empty(len(qs), k)
        n = index.get_current_count()
        kk = min(k, n)
        if kk == 0:
            return out
        index.set_ef(max(int(params.get("ef", self.options["ef"])), kk))
        labels, dist = index.knn_query(qs, k=kk)
        out.ids[:, :kk] = labels.astype(np.int64)
        out.scores[:, :kk] = -dist if self.metric == "l2" else 1.0 - dist
        return out

    def count(self) -> int:
        return int(self._require().get_current_count())

    def get_payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        if self._payloads is None:
            raise StoreError(f"hnswlib store at {self.location} is not open.")
        return self._payloads.get(ids)

    def flush(self) -> None:
        index = self._require()
        assert self._payloads is not None
        self._payloads.commit()
        write_file_atomic(self._folder(self.location) / INDEX_FILE, index.save_index)

    def close(self) -> None:
        if self._index is not None:
            try:
                if getattr(self, "_dirty", True):
                    self.flush()
            finally:
                self._index = None
                if self._payloads is not None:
                    self._payloads.close()
                    self._payloads = None


def _check_file_dim(path: Path, dim: int) -> None:
    """Refuse an hnswlib file whose vectors are not ``dim`` floats (hnswlib would load it anyway).

    The file starts with six little-endian ``size_t`` fields; the vector bytes of an element are
    ``label_offset - offset_data`` (fields 5 and 6), which must equal ``4 * dim``.
    """
    import struct

    try:
        with open(path, "rb") as fh:
            head = fh.read(48)
    except OSError as exc:
        raise StoreError(f"Could not read the hnswlib index {path}: {exc}") from exc
    if len(head) < 48:
        raise StoreError(f"The hnswlib index {path} is truncated ({len(head)} bytes).")
    label_offset, offset_data = struct.unpack("<6Q", head)[4:6]
    got = label_offset - offset_data
    if got != 4 * dim:
        raise StoreError(
            f"The hnswlib index {path} holds vectors of {got // 4 if got % 4 == 0 else got / 4} "
            f"dimensions, but its store records {dim}: the file was replaced or damaged. Rebuild the "
            "index (slimvec ingest/migrate --rebuild).")

