"""The FAISS store's tail: vectors added since ``index.faiss`` was last written whole.

A FAISS index has no log: persisting it means writing the whole index file. A store that takes
small writes (the service commits every write request) would rewrite ~100 MB per commit at
300,000 vectors. So a flush that adds few vectors to a large index writes them to
``tail.npy`` instead, beside the last whole ``index.faiss``; opening the store adds them to the
index again. The index file is written whole (a checkpoint) when the tail would pass
:func:`tail_limit`, and always by ``finalize`` and by a writer's ``close``, so a finished bulk
build has no tail.

The file holds one row per vector: its position in the index (an int64 viewed as two float32)
and the vector as it was added (prepared: unit length for cosine). A row whose position is
below the index file's ``ntotal`` is already in it (a checkpoint was written and the process
stopped before the tail was removed) and is skipped. Rows are whole-file replaced by atomic
rename like every other store file, and ``ids.npy`` is written first, so a kill leaves ids ahead
of index + tail, which the store cuts back as before.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from slimvec.errors import StoreError

__all__ = ["TAIL_FILE", "TAIL_MAX_ROWS", "tail_limit", "pack_tail", "read_tail"]

TAIL_FILE = "tail.npy"
#: most vectors a tail holds before a checkpoint: replaying them costs a reader that opens the
#: store about a second of HNSW inserts at most, and writing them costs ~1.5 MB at 192-d
TAIL_MAX_ROWS = 2048


def tail_limit(written: int) -> int:
    """Most vectors a tail may hold over an index file of ``written`` vectors: an eighth of it
    (a small index is cheap to write whole) up to :data:`TAIL_MAX_ROWS`."""
    return min(TAIL_MAX_ROWS, max(int(written), 0) // 8)


def pack_tail(start: int, vecs: np.ndarray) -> np.ndarray:
    """The file's rows for ``vecs`` added at positions ``start``, ``start + 1``, ..."""
    vecs = np.ascontiguousarray(vecs, dtype=np.float32)
    pos = np.arange(start, start + len(vecs), dtype=np.int64).view(np.float32).reshape(-1, 2)
    return np.concatenate([pos, vecs], axis=1)


def read_tail(path: Path, ntotal: int, dim: int) -> tuple[int, np.ndarray]:
    """The vectors of the tail at ``path`` that the index file (``ntotal`` vectors of ``dim``)
    lacks, and the position of the first: ``(ntotal, (n, dim) float32)``.

    Raises
    ------
    StoreError
        A file of the wrong shape, or positions that do not continue the index file's (a gap
        would shift every later vector's id).
    """
    try:
        packed = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise StoreError(f"Could not read the FAISS store's tail {path}: {exc}. Rebuild the index "
                         "(slimvec ingest/migrate --rebuild).") from exc
    if packed.dtype != np.float32 or packed.ndim != 2 or packed.shape[1] != dim + 2:
        raise StoreError(f"The FAISS store's tail {path} holds {packed.dtype} rows of shape "
                         f"{packed.shape}, expected float32 rows of {dim + 2} values (position and "
                         f"a {dim}-d vector): the file was replaced or damaged. Rebuild the index.")
    pos = np.ascontiguousarray(packed[:, :2]).view(np.int64).ravel()
    keep = pos >= ntotal
    if keep.any() and not np.array_equal(pos[keep], np.arange(ntotal, ntotal + int(keep.sum()))):
        raise StoreError(f"The FAISS store's tail {path} does not continue its index file (which "
                         f"ends at position {ntotal}): the files come from different commits. "
                         "Restore a snapshot or rebuild the index.")
    return ntotal, np.ascontiguousarray(packed[keep, 2:])
