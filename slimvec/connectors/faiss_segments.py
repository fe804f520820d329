"""The FAISS store's appendable segment: the vectors its graph does not hold yet.

A graph index (HNSW) takes a vector at the cost of an insertion (``efConstruction`` candidate
distances), which a writer would otherwise wait for. So a graph store puts every new vector in an
appendable segment first, searched exactly, and a write is acknowledged there. A background
builder (:class:`GraphBuilder`) inserts the segment's vectors into a copy of the graph in one large
``add`` (OpenMP spreads it over every core); the store takes the copy in place of its graph
between two calls, and searches then find those vectors through the graph. The graph being
searched is never written to, so readers and writers never wait for an insertion (Qdrant's
appendable segment and optimizer, Milvus' growing and sealed segments, at one graph). The cost:
while a round runs the graph is held twice in RAM.

On disk, ``index.faiss`` is the graph as last written whole (a checkpoint), and the vectors
after it are in chunk files ``tail-<start>.npy``, one written per flush and never changed again
(so a snapshot that pinned one keeps it). A row is the vector's position (an int64 viewed as two
float32) and the vector as it was added (prepared: unit length for cosine). Opening reads every
chunk and ``tail.npy`` (the single file of earlier versions); rows below the index file's
``ntotal`` are in it already and are skipped, rows given twice (a merge of chunks killed before it
removed the parts) are the same vector. A checkpoint deletes the chunks the graph file holds whole.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import StoreError

__all__ = ["Appendable", "GraphBuilder", "TAIL_FILE", "TAIL_MAX_ROWS", "tail_limit", "pack_tail",
           "read_chunks", "write_chunk", "exact_top", "merge_top", "ROUND_MIN", "MAX_CHUNKS",
           "graph_file", "graph_files", "fan_out"]

TAIL_FILE = "tail.npy"
#: fewest vectors the graph may hold beyond its file before a flush writes the file whole
TAIL_MAX_ROWS = 2048
#: most vectors the graph may hold beyond its file: they are replayed into the graph after a crash
#: and kept as float32 rows until the file is written (1.5 GB at 1,536-d)
CHECKPOINT_MAX_ROWS = 1 << 18
#: fewest new vectors a background insertion round starts with (a round copies the graph)
ROUND_MIN = 2048
#: chunk files a flush leaves before it writes the segment's rows as one chunk again
MAX_CHUNKS = 16
#: query-by-row scores an exact search of the segment holds at once (64 MB of float32)
EXACT_BLOCK = 16 << 20


def graph_file(start: int) -> str:
    """The file of the graph that holds the positions from ``start`` on (``index.faiss`` for the
    first; a graph adopted later is ``graph-<start>.faiss``)."""
    return "index.faiss" if int(start) == 0 else f"graph-{int(start):012d}.faiss"


def graph_files(folder: Path) -> list[tuple[int, Path]]:
    """Every adopted graph's (start, file) in ``folder``, by start."""
    found = [(int(p.stem.split("-")[1]), p) for p in folder.glob("graph-*.faiss")
             if p.stem.split("-")[1].isdigit()]
    return sorted(found)


def fan_out(parts: list[tuple[int, Any]], search: Callable[[Any, int], Any], nq: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """The hits of every graph merged best first: ``search(index, start)`` gives one graph's
    (scores, local positions) or None to leave it out; returns (scores, positions) over the
    store's positions, as wide as the widest graph's answer. Several graphs are searched in
    parallel threads (FAISS releases the GIL)."""
    if len(parts) == 1:
        got = [search(parts[0][1], parts[0][0])]
    else:
        global _POOL
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max(2, min(8, os.cpu_count() or 2)),
                                       thread_name_prefix="slimvec-fan-out")
        got = list(_POOL.map(lambda part: search(part[1], part[0]), parts))
    hits = [(p if start == 0 else np.where(p >= 0, p + start, -1), s)
            for (start, _), r in zip(parts, got) if r is not None for s, p in [r]]
    if len(hits) == 1:
        return hits[0][1], hits[0][0]
    if not hits:
        return np.empty((nq, 0), np.float32), np.empty((nq, 0), np.int64)
    pos, scores = merge_top(hits, max(p.shape[1] for p, _ in hits))
    return scores.astype(np.float32), pos


_POOL: ThreadPoolExecutor | None = None


def tail_limit(written: int) -> int:
    """Most vectors the graph may hold beyond an index file of ``written`` vectors before a flush
    writes it whole: half of it, so a load writes the file a logarithmic number of times (each
    write re-encodes every vector), from :data:`TAIL_MAX_ROWS` up to :data:`CHECKPOINT_MAX_ROWS`."""
    return max(TAIL_MAX_ROWS, min(max(int(written), 0) // 2, CHECKPOINT_MAX_ROWS))


def pack_tail(start: int, vecs: np.ndarray) -> np.ndarray:
    """A chunk's rows for ``vecs`` added at positions ``start``, ``start + 1``, ..."""
    vecs = np.ascontiguousarray(vecs, dtype=np.float32)
    pos = np.arange(start, start + len(vecs), dtype=np.int64).view(np.float32).reshape(-1, 2)
    return np.concatenate([pos, vecs], axis=1)


def write_chunk(folder: Path, start: int, vecs: np.ndarray,
                save: Callable[[Path, np.ndarray], None]) -> str:
    """Write ``vecs`` (positions from ``start``) as the chunk ``tail-<start>.npy`` with ``save``
    (an atomic whole-file write); returns its name."""
    name = f"tail-{int(start):012d}.npy"
    save(folder / name, pack_tail(start, vecs))
    return name


def read_chunks(folder: Path, ntotal: int, dim: int) -> tuple[np.ndarray, dict[str, int]]:
    """The vectors after an index file of ``ntotal`` vectors of ``dim``, from every chunk in
    ``folder``, and each chunk's end position (``{name: end}``).

    Raises
    ------
    StoreError
        A chunk of the wrong shape, or positions that do not continue the index file's (a gap
        would shift every later vector's id).
    """
    found: list[np.ndarray] = []
    ends: dict[str, int] = {}
    for path in sorted(folder.glob("tail*.npy")):
        try:
            packed = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise StoreError(f"Could not read the FAISS store's tail {path}: {exc}. Rebuild the "
                             "index (slimvec ingest/migrate --rebuild).") from exc
        if packed.dtype != np.float32 or packed.ndim != 2 or packed.shape[1] != dim + 2:
            raise StoreError(f"The FAISS store's tail {path} holds {packed.dtype} rows of shape "
                             f"{packed.shape}, expected float32 rows of {dim + 2} values (position "
                             f"and a {dim}-d vector): the file was replaced or damaged. Rebuild "
                             "the index.")
        pos = np.ascontiguousarray(packed[:, :2]).view(np.int64).ravel()
        ends[path.name] = int(pos.max()) + 1 if len(pos) else 0
        found.append(packed[pos >= ntotal])
    rows = np.concatenate(found) if found else np.empty((0, dim + 2), np.float32)
    pos = np.ascontiguousarray(rows[:, :2]).view(np.int64).ravel()
    pos, first = np.unique(pos, return_index=True)
    if len(pos) and not np.array_equal(pos, np.arange(ntotal, ntotal + len(pos))):
        raise StoreError(f"The FAISS store's tail in {folder} does not continue its index file "
                         f"(which ends at position {ntotal}): the files come from different "
                         "commits. Restore a snapshot or rebuild the index.")
    return np.ascontiguousarray(rows[first, 2:]), ends


class Appendable:
    """The vectors at positions ``start`` .. ``start + n - 1``, in a buffer that grows by doubling."""

    def __init__(self, start: int, dim: int) -> None:
        self.start, self.n = int(start), 0
        self._buf = np.empty((0, dim), dtype=np.float32)

    def append(self, vecs: np.ndarray) -> None:
        """Add ``vecs`` at the next positions."""
        need = self.n + len(vecs)
        if need > len(self._buf):
            grown = np.empty((max(need, 2 * len(self._buf), 1024), self._buf.shape[1]), np.float32)
            grown[:self.n] = self._buf[:self.n]
            self._buf = grown
        self._buf[self.n:need] = vecs
        self.n = need

    @property
    def end(self) -> int:
        """The position after the last vector."""
        return self.start + self.n

    def since(self, position: int) -> np.ndarray:
        """The vectors from ``position`` on (a view: valid until the next append)."""
        return self._buf[max(int(position) - self.start, 0):self.n]

    def row(self, position: int) -> np.ndarray:
        """The vector at ``position``."""
        return self._buf[int(position) - self.start].copy()

    def drop_below(self, position: int) -> None:
        """Forget the vectors before ``position`` (the graph's file holds them)."""
        keep = self.since(position).copy()
        self.start, self.n, self._buf = int(position), len(keep), keep


def exact_top(queries: np.ndarray, rows: np.ndarray, k: int, allowed: np.ndarray | None,
              l2: bool) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best ``rows`` of each query, exactly: (scores ``(n, k)``, row numbers, -1 past
    the allowed ones). Scores are inner products, or negated squared L2 distances for ``l2``."""
    nq, k = len(queries), min(int(k), len(rows))
    scores = np.full((nq, k), -np.inf, dtype=np.float32)
    found = np.full((nq, k), -1, dtype=np.int64)
    if k == 0:
        return scores, found
    sq = (rows * rows).sum(axis=1) if l2 else None
    step = max(1, EXACT_BLOCK // max(len(rows), 1))
    for lo in range(0, nq, step):
        s = queries[lo:lo + step] @ rows.T
        if sq is not None:
            s = 2 * s - sq - (queries[lo:lo + step] ** 2).sum(axis=1, keepdims=True)
        if allowed is not None:
            s[:, ~allowed] = -np.inf
        top = np.argpartition(-s, k - 1, axis=1)[:, :k] if k < s.shape[1] else np.tile(np.arange(k), (len(s), 1))
        best = np.take_along_axis(s, top, axis=1)
        order = np.argsort(-best, axis=1, kind="stable")
        top, best = np.take_along_axis(top, order, axis=1), np.take_along_axis(best, order, axis=1)
        found[lo:lo + step] = np.where(np.isfinite(best), top, -1)
        scores[lo:lo + step] = best
    return scores, found


def merge_top(lists: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best per row of several (ids, scores) result lists (ids -1 are holes), best
    first: (ids, scores)."""
    all_ids = np.concatenate([i for i, _ in lists], axis=1)
    all_scores = np.where(all_ids >= 0, np.concatenate([s for _, s in lists], axis=1), -np.inf)
    order = np.argsort(-all_scores, axis=1, kind="stable")[:, :k]
    best = np.take_along_axis(all_scores, order, axis=1)
    return np.where(np.isfinite(best), np.take_along_axis(all_ids, order, axis=1), -1), best


class GraphBuilder:
    """One background insertion round at a time: a copy of the graph with new vectors added.

    The copy is taken under :attr:`lock`, which the store also holds while it changes the graph
    it searches (a checkpoint swapping its codes), so a round never copies a graph mid-change.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._job: Future[Any] | None = None

    @property
    def busy(self) -> bool:
        """A round is under way or done and not yet taken."""
        return self._job is not None

    def start(self, index: Any, vecs: np.ndarray, threads: int) -> None:
        """Insert ``vecs`` into a copy of ``index`` with ``threads`` OpenMP threads, in the
        builder's thread (an OpenMP thread count is per thread: the caller's is passed on)."""
        import faiss

        from slimvec.connectors.faiss_build import add_with_threads

        def run() -> Any:
            with self.lock:
                copy = faiss.clone_index(index)
            add_with_threads(copy, vecs, threads)
            return copy

        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="slimvec-graph")
        self._job = self._pool.submit(run)

    def take(self, wait: bool = False) -> Any | None:
        """The built copy when the round is done (or, with ``wait``, once it is), else None; an
        error of the round is raised here, in the caller."""
        job = self._job
        if job is None or not (wait or job.done()):
            return None
        self._job = None
        return job.result()

    def close(self) -> None:
        """Wait for a round under way and drop its result; stop the thread."""
        if self._job is not None:
            self._job.exception()
            self._job = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

