"""hnswlib: an HNSW graph in one file, capacity grown as needed, payloads in SQLite.

Spec: ``hnsw[:M=16,ef_construction=200,ef=64,threads=0]``. Upserting an existing id replaces its
vector in place (hnswlib updates labels it already holds).

Deleting marks the label deleted in the graph (``mark_deleted``: never returned again, the slot is
kept) and records a tombstone in the payload file's ``deleted`` table, since hnswlib cannot list
its deleted labels; both are written at :meth:`HnswStore.flush` (payloads first, so a crash between
the two leaves tombstones the next open re-applies). Upserting a deleted id again unmarks it and
overwrites its vector. A filtered search passes hnswlib a ``filter`` callable over the allowed ids.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.connectors.base import SearchResult, VectorStore
from slimvec.connectors.options import MAX_DIM, check_options, whole
from slimvec.connectors.payloads import PayloadTable, PayloadTableStore, select_filter
from slimvec.connectors.storefiles import META_FILE, read_meta, write_file_atomic, write_meta
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


class HnswStore(PayloadTableStore, VectorStore):
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
    option_defaults, option_rules = DEFAULTS, RULES
    reader = "slimvec.connectors.file_readers:HnswSource"
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
        self._index: Any = None
        self._payloads: PayloadTable | None = None
        self._writes = 0  # bumped by every write: the cached live ids (ids()) are of this count
        self._live: tuple[int, np.ndarray] | None = None

    def _space(self) -> str:
        return {"cosine": "cosine", "ip": "ip", "l2": "l2"}[self.metric]

    def create(self, dim: int, metric: str = "cosine") -> HnswStore:
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
        self._deleted: set[int] = set()
        write_meta(folder, self.name, self.dim, self.metric, self.options)
        self.flush()
        return self

    def open(self) -> HnswStore:
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
        self._deleted = self._payloads.deleted_ids()
        self._writes += 1
        self._reapply_tombstones()
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

    def _upsert(self, ids_arr: np.ndarray, vecs: np.ndarray,
                payloads: list[dict[str, Any] | None] | None, full: np.ndarray | None) -> None:
        index = self._require()
        self._dirty = True
        self._writes += 1
        rows = None
        if payloads is not None:  # encoded before any vector is added: all or nothing
            assert self._payloads is not None
            rows = self._payloads.encode(ids_arr.tolist(), payloads)
        needed = index.get_current_count() + len(ids_arr)
        capacity = index.get_max_elements()
        if needed > capacity:
            new_capacity = max(needed, 2 * capacity)
            log.debug("growing hnswlib capacity %d -> %d", capacity, new_capacity)
            index.resize_index(new_capacity)
        index.add_items(vecs, ids_arr.astype(np.uint64))  # unmarks a deleted label it re-adds
        if self._deleted:
            back = [i for i in ids_arr.tolist() if i in self._deleted]
            if back:
                self._deleted.difference_update(back)
                assert self._payloads is not None
                self._payloads.unmark_deleted(back)
        if rows is not None:
            assert self._payloads is not None
            self._payloads.put_rows(rows)

    def _search(self, qs: np.ndarray, k: int, filter: Any, params: dict[str, Any]) -> SearchResult:
        """k nearest live vectors; ``filter`` (a :class:`slimvec.filters.Filter` or an array of
        allowed ids) goes to hnswlib as a ``filter`` callable."""
        index = self._require()
        out = SearchResult.empty(len(qs), k)
        allowed = None if filter is None else self._allowed(filter)
        n = self.count() if allowed is None else len(allowed)
        kk = min(k, n)
        if kk == 0:
            return out
        ef = max(int(params.get("ef", self.options["ef"])), kk)
        index.set_ef(ef)
        try:
            if allowed is None:
                try:
                    labels, dist = index.knn_query(qs, k=kk)
                except RuntimeError:  # fewer than k live labels reached past the deleted ones
                    labels, dist = self._filtered_query(qs, kk, set(self.ids().tolist()), ef)
            else:
                labels, dist = self._filtered_query(qs, kk, allowed, ef)
        finally:
            index.set_ef(int(self.options["ef"]))
        out.ids[:, :kk] = labels.astype(np.int64)
        out.scores[:, :kk] = np.where(labels >= 0, -dist if self.metric == "l2" else 1.0 - dist, -np.inf)
        return out

    def _allowed(self, flt: Any) -> set[int]:
        if isinstance(flt, (np.ndarray, list, tuple, set, frozenset)):
            return {int(i) for i in np.asarray(list(flt) if isinstance(flt, (set, frozenset)) else flt,
                                                dtype=np.int64).ravel()} - self._deleted
        return set(self.filter_ids(flt).tolist())

    def _filtered_query(self, qs: np.ndarray, kk: int, allowed: set[int], ef: int
                        ) -> tuple[np.ndarray, np.ndarray]:
        """hnswlib raises when it finds fewer than k allowed labels: retry such a query with a
        wider beam, then row by row with fewer results (padded with -1)."""
        index = self._require()
        keep = allowed.__contains__
        try:
            return index.knn_query(qs, k=kk, filter=keep, num_threads=1)
        except RuntimeError:
            pass
        labels = np.full((len(qs), kk), -1, dtype=np.int64)
        dist = np.full((len(qs), kk), np.inf, dtype=np.float32)
        index.set_ef(max(ef, min(4 * kk + 64, len(allowed))))
        for row in range(len(qs)):
            want = kk
            while want > 0:
                try:
                    lab, d = index.knn_query(qs[row:row + 1], k=want, filter=keep, num_threads=1)
                except RuntimeError:
                    want = want - 1 if want <= 8 else want // 2
                    continue
                labels[row, :want], dist[row, :want] = lab[0], d[0]
                break
        return labels, dist

    def count(self) -> int:
        return int(self._require().get_current_count()) - len(self._deleted)

    def dead_positions(self) -> int:
        """Deleted labels whose graph slots are kept (``mark_deleted``); ``slimvec compact``
        rebuilds the graph from the kept full vectors to shed them."""
        return len(self._deleted)

    def get_payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        if self._payloads is None:
            raise StoreError(f"hnswlib store at {self.location} is not open.")
        return self._payloads.get(ids)

    # ---------------------------------------------- delete / filter / payload update (issue 25)
    def _reapply_tombstones(self) -> None:
        """Mark deleted what the payload file tombstoned but the graph file does not (a crash
        between the two writes of a flush)."""
        index = self._require()
        for i in self._deleted:
            try:
                index.mark_deleted(int(i))
            except RuntimeError:  # already marked, or a label the graph never held
                pass

    def ids(self) -> np.ndarray:
        """Every live label, sorted; cached until the next write (issue 37)."""
        cached = self._live
        if cached is not None and cached[0] == self._writes:
            return cached[1]
        labels = np.asarray(self._require().get_ids_list(), dtype=np.int64)
        if self._deleted:
            labels = labels[~np.isin(labels, np.fromiter(self._deleted, dtype=np.int64))]
        self._live = (self._writes, np.sort(labels))
        return self._live[1]

    def filter_ids(self, flt: Any = None) -> np.ndarray:
        """Live ids matching ``flt``: one SQL query over the payload table (Python evaluation for
        what SQL cannot say, :func:`~slimvec.connectors.payloads.select_filter`)."""
        assert self._payloads is not None
        return select_filter(self._payloads, self.ids(), flt)

    def delete(self, ids: Sequence[int] | np.ndarray) -> int:
        """``mark_deleted`` each stored id, drop its payload row and record its tombstone."""
        index = self._require()
        known = self._known(ids).tolist()
        if not known:
            return 0
        self._dirty = True
        self._writes += 1
        assert self._payloads is not None
        for i in known:
            index.mark_deleted(int(i))
        self._deleted.update(known)
        self._payloads.delete(known)
        self._payloads.mark_deleted(known)
        return len(known)

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

