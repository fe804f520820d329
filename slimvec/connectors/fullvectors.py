"""Full-dimension vectors kept on disk next to a reduced index, for two-stage search.

The small index answers ``k x R`` candidates; :meth:`FullVectors.rerank` re-scores them with the
original vectors and keeps the best ``k``. The full vectors are never loaded into RAM: they live in
a raw row-major file (``vectors.f32`` or ``vectors.f16``) read through ``np.memmap``, so a search
touches only the pages of its candidates. Only the id column (8 bytes per vector) is held in RAM
to map ids to rows.

Layout of the folder::

    state.json      {"dim", "dtype", "metric", "rows"}  -- rows committed, written atomically
    vectors.f32     rows x dim values (append-only)
    ids.i64         rows int64 ids (append-only, same order)

Appends go past ``rows``; :meth:`FullVectors.commit` fsyncs both files and then records the new
``rows``. Reopening for writing cuts anything after the last commit, so a crash never leaves a
half row, and a re-upserted id simply gets a later row (the last row of an id wins).

:meth:`FullVectors.delete` appends a tombstone row for each id (id ``-1 - id``, a zero vector),
committed like any row: when an id's last row is a tombstone, the id is unknown to :meth:`get`,
:meth:`rerank` drops it, and a later append brings it back. :meth:`compact_into` writes the
live rows to a new folder (the index swaps its manifest to it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.connectors.base import MAX_PADDED_K, SearchResult, check_k
from slimvec.errors import ConfigError, DimensionMismatchError, PersistenceError
from slimvec.persistence import read_json, write_json_atomic

__all__ = ["FullVectors", "FULL_DIR", "FULL_DTYPES", "FULL_ID_RAM", "rescore_bytes_per_vector",
           "vectors_file_name"]

FULL_DIR = "full"
STATE = "state.json"
IDS = "ids.i64"
FULL_DTYPES = ("float32", "float16")
#: full-vector values gathered at once while re-ranking (bounds RAM whatever the candidate count)
_RERANK_BLOCK = 1 << 24
#: rows an exact scan gathers at once into its reused buffer (768 KiB of float16 MiniLM rows: the
#: block stays in cache, and a fresh allocation per query page-faults: 2,000 rows took 3.8 ms
#: through a new buffer against 0.2 ms through a reused one, issue 51)
_SCAN_BLOCK = 1024
#: idle scan buffers kept per store (one is 768 KiB of float16 MiniLM rows): a service's thread
#: pool does not keep one per thread
_SCAN_POOL = 4
_SIGN32 = np.int32(-(2 ** 31))
_HALF_BIAS = np.float32(2.0 ** 112)


def _as_float32(rows: np.ndarray) -> np.ndarray:
    """Rows of the side file as float32, bit-exact.

    float16 is widened with integer operations, which numpy vectorises: the sign-extended half
    masked to its exponent and mantissa, shifted into a float32's place and multiplied by 2^112
    (the exponent bias difference; a half subnormal becomes a float32 subnormal that the multiply
    normalises), then the sign put back. numpy's own ``astype`` has no SIMD path for half floats
    on this build: 302 against 132 us for 320 x 384 values, 39 against 29 us for 40 x 384
    (issue 28 item 4). A row holding inf or NaN (exponent 31) goes through ``astype``.
    """
    if rows.dtype != np.float16:
        return rows.astype(np.float32, copy=False)
    x = np.ascontiguousarray(rows).view(np.int16).astype(np.int32)  # sign-extended
    sign = x & _SIGN32
    x &= 0x7FFF
    if x.size and x.max() >= 0x7C00:  # inf / NaN: not what the shift handles
        return rows.astype(np.float32)
    x <<= 13
    out = x.view(np.float32)
    out *= _HALF_BIAS
    x |= sign
    return out


def _top(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` columns of each row (padding, id -1, last), best first."""
    scores = np.where(ids >= 0, scores, np.float32(-np.inf))
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    if len(order) == 1:  # one query (a single search's scan): no row index
        return scores[:, order[0]], ids[:, order[0]]
    rows = np.arange(len(scores))[:, None]
    return scores[rows, order], ids[rows, order]


def vectors_file_name(dtype: str) -> str:
    """File name of the full vectors kept at ``dtype`` inside the full-vector folder."""
    return "vectors.f32" if dtype == "float32" else "vectors.f16"


#: RAM per vector of a rescored index's full-vector id lookup (sorted ids + rows, int64 each); the
#: full vectors themselves are memory-mapped from disk (``slimvec tune`` and ``plan`` count them
#: on disk)
FULL_ID_RAM = 16


def rescore_bytes_per_vector(dim: int, keep_full: str | None = "float32") -> tuple[int, int]:
    """(RAM, disk) bytes per vector that rescoring from full vectors adds: the id lookup in RAM
    (:data:`FULL_ID_RAM`) and, on disk, the ``dim``-dimensional vector at ``keep_full``'s dtype
    plus its int64 id. ``slimvec tune``, ``slimvec plan``, report.html's planner and
    ``slimvec info`` use it."""
    return FULL_ID_RAM, int(dim) * np.dtype(keep_full or "float32").itemsize + 8


class FullVectors:
    """Append-only, memory-mapped store of full vectors looked up by id.

    Use :meth:`create` for a new folder, :meth:`open` to read or append.

    Attributes
    ----------
    folder : Path
    dim : int
    dtype : str
        ``float32`` or ``float16`` (half the disk, scores within ~1e-3).
    metric : str
        ``cosine`` vectors are stored unit-normalised.
    rows : int
        Committed rows.
    """

    def __init__(self, folder: Path, dim: int, dtype: str, metric: str, rows: int) -> None:
        self.folder, self.dim, self.dtype, self.metric, self.rows = folder, dim, dtype, metric, rows
        self._vec_fh: Any = None
        self._ids_fh: Any = None
        self._pending = 0
        self._map: np.ndarray | None = None
        self._sorted_ids: np.ndarray | None = None
        self._sorted_rows: np.ndarray | None = None
        self._dense = False  # the live ids are consecutive (see _lookup_table)
        self._scan_pool: list[tuple[Any, np.ndarray]] = []  # idle (flat index, buffer) pairs of the exact scan

    # -------------------------------------------------------------- lifecycle
    @classmethod
    def create(cls, folder: str | os.PathLike[str], dim: int, dtype: str = "float32",
               metric: str = "cosine") -> FullVectors:
        """A new empty store at ``folder`` (created; must not hold one already)."""
        if dtype not in FULL_DTYPES:
            raise ConfigError(f"Full vectors dtype {dtype!r} unknown. Known: {', '.join(FULL_DTYPES)}.")
        folder = Path(folder)
        if (folder / STATE).exists():
            raise PersistenceError(f"{folder} already holds full vectors; open it instead.")
        folder.mkdir(parents=True, exist_ok=True)
        for name in (vectors_file_name(dtype), IDS):
            (folder / name).write_bytes(b"")
        out = cls(folder, int(dim), dtype, metric, 0)
        out._write_state()
        return out

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> FullVectors:
        """Open an existing store (reading, or appending after :meth:`truncate_to_committed`)."""
        folder = Path(folder)
        state = read_json(folder / STATE)
        try:
            out = cls(folder, int(state["dim"]), str(state["dtype"]), str(state["metric"]),
                      int(state["rows"]))
        except (KeyError, ValueError) as exc:
            raise PersistenceError(f"{folder / STATE} is incomplete ({exc}); rebuild the index.") from exc
        if out.dtype not in FULL_DTYPES:
            raise PersistenceError(f"{folder / STATE}: dtype {out.dtype!r} unknown.")
        item = np.dtype(out.dtype).itemsize
        for name, need in ((vectors_file_name(out.dtype), out.rows * out.dim * item), (IDS, out.rows * 8)):
            size = (folder / name).stat().st_size if (folder / name).exists() else -1
            if size < need:
                raise PersistenceError(f"{folder / name} holds {size} bytes, fewer than the {need} "
                                       f"committed in {folder / STATE}; rebuild the index.")
        return out

    def _write_state(self) -> None:
        write_json_atomic(self.folder / STATE, {"dim": self.dim, "dtype": self.dtype,
                                                "metric": self.metric, "rows": self.rows})

    def truncate_to_committed(self) -> None:
        """Cut rows appended after the last commit (a crashed or killed writer)."""
        item = np.dtype(self.dtype).itemsize
        for name, size in ((vectors_file_name(self.dtype), self.rows * self.dim * item), (IDS, self.rows * 8)):
            with open(self.folder / name, "r+b") as fh:
                fh.truncate(size)
                fh.flush()
                os.fsync(fh.fileno())

    # ------------------------------------------------------------------ write
    def append(self, ids: Sequence[int] | np.ndarray, vectors: np.ndarray) -> None:
        """Append rows (not durable before :meth:`commit`)."""
        ids_arr = np.asarray(ids, dtype=np.int64).ravel()
        vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[1] != self.dim:
            raise DimensionMismatchError("full vectors", self.dim, vecs.shape[-1])
        if len(ids_arr) != len(vecs):
            raise ConfigError(f"full vectors: {len(ids_arr)} ids for {len(vecs)} vectors.")
        if self.metric == "cosine":
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = vecs / np.where(norms > 0, norms, 1.0)
        if self._vec_fh is None:
            self.truncate_to_committed()
            self._vec_fh = open(self.folder / vectors_file_name(self.dtype), "ab")
            self._ids_fh = open(self.folder / IDS, "ab")
        self._vec_fh.write(np.ascontiguousarray(vecs, dtype=self.dtype).tobytes())
        self._ids_fh.write(ids_arr.tobytes())
        self._pending += len(ids_arr)

    def commit(self) -> None:
        """Make appended rows durable, then record them (the commit point)."""
        if self._vec_fh is None:
            return
        for fh in (self._vec_fh, self._ids_fh):
            fh.flush()
            os.fsync(fh.fileno())
        self.rows += self._pending
        self._pending = 0
        self._write_state()
        self._map = self._sorted_ids = self._sorted_rows = None

    def adopt(self, folder: str | os.PathLike[str]) -> None:
        """Append every committed row of the full vectors at ``folder`` (another writer's, of the
        same dimension, precision and metric) as they are (durable at :meth:`commit`)."""
        other = FullVectors.open(folder)
        if (other.dim, other.dtype, other.metric) != (self.dim, self.dtype, self.metric):
            raise ConfigError(f"{other.folder} keeps {other.dtype} full vectors of {other.dim} "
                              f"dimensions ({other.metric}), this index {self.dtype} of {self.dim} "
                              f"({self.metric}): it was written for another index.")
        if self._vec_fh is None:
            self.truncate_to_committed()
            self._vec_fh = open(self.folder / vectors_file_name(self.dtype), "ab")
            self._ids_fh = open(self.folder / IDS, "ab")
        item = other.dim * np.dtype(other.dtype).itemsize
        with open(other.folder / vectors_file_name(other.dtype), "rb") as fh:
            for lo in range(0, other.rows, 65536):
                self._vec_fh.write(fh.read(min(65536, other.rows - lo) * item))
        self._ids_fh.write(np.fromfile(other.folder / IDS, dtype=np.int64, count=other.rows).tobytes())
        self._pending += other.rows

    def delete(self, ids: Sequence[int] | np.ndarray) -> int:
        """Append tombstones for the stored ``ids`` (durable at :meth:`commit`); returns how many
        of them had a vector."""
        wanted = np.unique(np.asarray(ids, dtype=np.int64).ravel())
        wanted = wanted[wanted >= 0]
        known = wanted[np.isin(wanted, self.ids(), assume_unique=True)] if len(wanted) else wanted
        if not len(known):
            return 0
        if self._vec_fh is None:
            self.truncate_to_committed()
            self._vec_fh = open(self.folder / vectors_file_name(self.dtype), "ab")
            self._ids_fh = open(self.folder / IDS, "ab")
        self._vec_fh.write(np.zeros((len(known), self.dim), dtype=self.dtype).tobytes())
        self._ids_fh.write((-1 - known).astype(np.int64).tobytes())
        self._pending += len(known)
        return int(len(known))

    def ids(self) -> np.ndarray:
        """Every id with a live vector (committed rows), sorted."""
        return np.array(self._lookup_table()[1], copy=True)

    def dead_rows(self) -> int:
        """Committed rows that :meth:`compact_into` would drop (replaced, deleted, tombstones)."""
        return int(self.rows - len(self))

    def compact_into(self, folder: str | os.PathLike[str]) -> FullVectors:
        """Write the live rows (committed) to a new store at ``folder`` and return it, committed.

        The caller swaps it in (an index points its manifest at the new folder: one atomic
        write), then removes the old folder; this store is left untouched.
        """
        mm, sid, srows = self._lookup_table()
        order = np.argsort(srows)  # keep the file's row order
        keep_rows, keep_ids = srows[order], sid[order]
        out = FullVectors.create(folder, self.dim, self.dtype, self.metric)
        if mm is None:  # no committed rows: the new store is empty
            mm = np.empty((0, self.dim), dtype=self.dtype)
        with open(out.folder / vectors_file_name(self.dtype), "wb") as fv, \
                open(out.folder / IDS, "wb") as fi:
            for lo in range(0, len(keep_rows), 65536):
                fv.write(np.ascontiguousarray(mm[keep_rows[lo:lo + 65536]]).tobytes())
            fi.write(keep_ids.astype(np.int64).tobytes())
            for fh in (fv, fi):
                fh.flush()
                os.fsync(fh.fileno())
        out.rows = int(len(keep_rows))
        out._write_state()
        return out

    # ------------------------------------------------------------------- read
    def _lookup_table(self) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        if self._sorted_ids is None:
            raw = np.fromfile(self.folder / IDS, dtype=np.int64, count=self.rows)
            dead = raw < 0  # tombstones: -1 - id
            ids = np.where(dead, -1 - raw, raw)
            rows = np.arange(self.rows, dtype=np.int64)
            # the last row of an id wins: sort by (id, row) and keep the last of each run
            order = np.lexsort((rows, ids))
            sid = ids[order]
            last = np.ones(len(sid), dtype=bool)
            last[:-1] = sid[1:] != sid[:-1]
            last &= ~dead[order]  # an id whose last row is a tombstone is deleted
            self._sorted_ids, self._sorted_rows = sid[last], order[last]
            # live ids without a gap (an index whose ids count up): an id's place is id - first
            self._dense = bool(len(self._sorted_ids)) and int(self._sorted_ids[-1]) - int(
                self._sorted_ids[0]) == len(self._sorted_ids) - 1
            # a plain ndarray over the read-only mapping: no copy, no memmap per-call overhead
            self._map = (np.asarray(np.memmap(self.folder / vectors_file_name(self.dtype), dtype=self.dtype,
                                              mode="r", shape=(self.rows, self.dim)))
                         if self.rows else None)
        return self._map, self._sorted_ids, self._sorted_rows  # type: ignore[return-value]

    def __len__(self) -> int:
        return int(len(self._lookup_table()[1]))

    def get(self, ids: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Full vectors of ``ids`` (float32) and a mask of the ids found (rows of unknown ids are 0)."""
        mm, sid, srows = self._lookup_table()
        wanted = np.asarray(ids, dtype=np.int64).ravel()
        if mm is None or not len(wanted):
            return np.zeros((len(wanted), self.dim), dtype=np.float32), np.zeros(len(wanted), dtype=bool)
        pos = np.searchsorted(sid, wanted)
        np.minimum(pos, len(sid) - 1, out=pos)
        found = sid[pos] == wanted
        # np.take on axis 0 copies whole rows: half the time of ``mm[rows]``'s fancy indexing
        # (53 vs 96 us for 320 rows of 384 float16 values; issue 28 item 4)
        if found.all():  # the usual case on the search path: one gather, no mask
            return _as_float32(np.take(mm, srows[pos], axis=0)), found  # reads only these rows' pages
        out = np.zeros((len(wanted), self.dim), dtype=np.float32)
        out[found] = _as_float32(np.take(mm, srows[pos[found]], axis=0))
        return out, found

    def rerank(self, queries: np.ndarray, candidates: SearchResult, k: int) -> SearchResult:
        """Re-score candidates with the full vectors and keep the best ``k`` per query.

        Parameters
        ----------
        queries : ndarray (n, dim)
            Full-dimension queries.
        candidates : SearchResult
            Output of the reduced index (ids padded with -1).
        k : int
            Results per query: padded to ``k`` columns, or (above
            :data:`~slimvec.connectors.base.MAX_PADDED_K`) capped at the number of candidates.

        Returns
        -------
        SearchResult
            Scores are full-dimension similarities (cosine / inner product, or negated squared
            L2 distance); candidates without a full vector are dropped.

        Raises
        ------
        ConfigError
            A negative ``k``.
        """
        q = np.asarray(queries, dtype=np.float32)
        if q.ndim == 1:
            q = q[None, :]
        if q.shape[1] != self.dim:
            raise DimensionMismatchError("queries for the full vectors", self.dim, q.shape[1])
        if self.metric == "cosine":  # (np.linalg.norm costs more than this whole line per query)
            q = q / np.maximum(np.sqrt(np.einsum("ij,ij->i", q, q)), 1e-12)[:, None]
        n, kc = candidates.ids.shape
        k = check_k(k)
        if k > MAX_PADDED_K:  # as the stores do: no more columns than there are candidates
            k = min(k, kc)
        width = min(k, kc)
        step = max(1, _RERANK_BLOCK // max(1, kc * self.dim))  # queries per block
        if width == k and 0 < n <= step:  # the common case (one query, one block): no copy
            return SearchResult(*self._rerank_block(q, candidates.ids, width))
        out = SearchResult.empty(n, k)
        if width == 0:
            return out
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            ids, scores = self._rerank_block(q[lo:hi], candidates.ids[lo:hi], width)
            out.ids[lo:hi, :width], out.scores[lo:hi, :width] = ids, scores
        return out

    def _rerank_one(self, q: np.ndarray, cand: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """One query (the latency path): its candidates' rows scored and ranked by FAISS in one
        step, as :meth:`scan` scores them (padding and ids without a full vector dropped, the
        result padded with -1 / -inf)."""
        res = self._scan_unit(q, cand[0], width)
        return res.ids, res.scores

    def _rerank_block(self, q: np.ndarray, cand: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        if len(cand) == 1:
            return self._rerank_one(q, cand, width)
        n, kc = cand.shape
        flat = cand.ravel()
        padded = flat < 0
        vecs, found = self.get(np.where(padded, 0, flat) if padded.any() else flat)
        vecs = vecs.reshape(n, kc, self.dim)
        if self.metric == "l2":
            scores = -np.sum((vecs - q[:, None, :]) ** 2, axis=2)
        else:
            scores = np.matmul(vecs, q[:, :, None])[:, :, 0]  # (n, kc); einsum is slower here
        scores = scores.astype(np.float32, copy=False)
        missing = padded | ~found
        if missing.any():  # padding and ids without a full vector sort last and come out as -1
            scores = np.where(missing.reshape(n, kc), np.float32(-np.inf), scores)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :width]
        rows = np.arange(n)[:, None]
        top_scores, top_ids = scores[rows, order], cand[rows, order]
        return np.where(np.isfinite(top_scores), top_ids, -1), top_scores

    def scan(self, queries: np.ndarray, ids: np.ndarray, k: int) -> SearchResult:
        """Exact ``k`` nearest among ``ids`` by their full vectors, scored by FAISS.

        The rows of ``ids`` are gathered from the memory-mapped file, :data:`_SCAN_BLOCK` at a
        time, into a reused buffer (a small pool), which becomes the codes of a flat FAISS index
        (float16 rows: a ``QT_fp16`` scalar quantizer, which widens them in its SIMD kernel;
        float32 rows: ``IndexFlat``), searched once per block. Scores are those of
        :meth:`rerank` (cosine / inner product, or negated squared L2) up to float32 rounding;
        ids without a full vector are skipped. About 0.1-0.2 us a float16 MiniLM row against
        3 us for a gather, a widening and a matmul in numpy (issue 51; a loaded machine).
        """
        q = np.asarray(queries, dtype=np.float32)
        if q.ndim == 1:
            q = q[None, :]
        if q.shape[1] != self.dim:
            raise DimensionMismatchError("queries for the full vectors", self.dim, q.shape[1])
        if self.metric == "cosine":
            q = q / np.maximum(np.sqrt(np.einsum("ij,ij->i", q, q)), 1e-12)[:, None]
        return self._scan_unit(np.ascontiguousarray(q), np.asarray(ids, dtype=np.int64).ravel(), k)

    def _scan_unit(self, q: np.ndarray, wanted: np.ndarray, k: int) -> SearchResult:
        """:meth:`scan` of checked queries (float32 (n, dim), contiguous, unit length for cosine)
        among ``wanted`` (int64, any order; padding and unknown ids are skipped)."""
        mm, sid, srows = self._lookup_table()
        if mm is None or not len(wanted):
            return SearchResult.empty(len(q), k)
        if self._dense:  # no binary search: a scan of 2,000 of 20,000 ids 284 against 324 us
            pos = wanted - sid[0]
            found = None if pos.min() >= 0 and pos.max() < len(sid) else (pos >= 0) & (pos < len(sid))
        else:
            pos = np.searchsorted(sid, wanted)
            np.minimum(pos, len(sid) - 1, out=pos)
            found = sid[pos] == wanted
        if found is not None and not found.all():
            wanted, pos = wanted[found], pos[found]
            if not len(wanted):  # only padding or ids without a full vector
                return SearchResult.empty(len(q), k)
        rows = srows[pos]
        import faiss

        flat, buf = self._scan_pool.pop() if self._scan_pool else self._new_scan_tools(faiss)
        scores, labels = [], []
        threads = faiss.omp_get_max_threads()  # this thread's OpenMP setting (libgomp keeps one a thread)
        if len(q) == 1:  # one query is one thread's work: a team of idle threads costs ms on a busy machine
            faiss.omp_set_num_threads(1)
        try:
            for lo in range(0, len(rows), _SCAN_BLOCK):
                block = buf[:min(_SCAN_BLOCK, len(rows) - lo)]
                np.take(mm, rows[lo:lo + len(block)], axis=0, out=block)
                flat.reset()
                flat.add_sa_codes(block.view(np.uint8))
                dist, pos_in = flat.search(q, min(k, len(block)))
                scores.append(-dist if self.metric == "l2" else dist)
                labels.append(np.where(pos_in >= 0, wanted[lo + pos_in], -1))
        finally:
            flat.reset()
            faiss.omp_set_num_threads(threads)
            if len(self._scan_pool) < _SCAN_POOL:  # list pop / append: atomic under the GIL
                self._scan_pool.append((flat, buf))
        s, i = (scores[0], labels[0]) if len(scores) == 1 else _top(np.hstack(scores), np.hstack(labels), k)
        if s.shape[1] == k and i.min() >= 0:  # the usual case: k found for every query
            return SearchResult(i, s)
        out = SearchResult.empty(len(q), k)
        out.ids[:, :s.shape[1]] = i
        out.scores[:, :s.shape[1]] = np.where(i >= 0, s, np.float32(-np.inf))
        return out

    def _new_scan_tools(self, faiss: Any) -> tuple[Any, np.ndarray]:
        """A flat FAISS index over this store's rows and a gather buffer of :data:`_SCAN_BLOCK`
        rows: made once, then kept in a small pool (one a concurrent scan, at most
        :data:`_SCAN_POOL` idle), so a query allocates neither."""
        metric = faiss.METRIC_L2 if self.metric == "l2" else faiss.METRIC_INNER_PRODUCT
        flat = (faiss.IndexScalarQuantizer(self.dim, faiss.ScalarQuantizer.QT_fp16, metric)
                if self.dtype == "float16" else faiss.IndexFlat(self.dim, metric))
        return flat, np.empty((_SCAN_BLOCK, self.dim), dtype=self.dtype)

    def size_bytes(self) -> int:
        """Allocated bytes on disk."""
        from slimvec.persistence import allocated_bytes

        return allocated_bytes(self.folder)

    def close(self) -> None:
        """Close append handles (uncommitted rows are cut at the next open for writing)."""
        for fh in (self._vec_fh, self._ids_fh):
            if fh is not None:
                fh.close()
        self._vec_fh = self._ids_fh = None
        self._map = None
