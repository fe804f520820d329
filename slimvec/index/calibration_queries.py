"""Query vectors a ``rescore=auto`` depth is calibrated on (``slimvec calibrate --queries``).

By default the writer calibrates the rescoring depth on a sample of corpus vectors used as
queries, plus a ladder step of headroom, because real queries fare worse: on 24,722 MiniLM
sentences the depth that reached 0.99 on corpus vectors (16, 0.994) gave 1,000 held-out queries
0.983 (docs/benchmarks/rescore.md). A user with real queries
stores them once in the index folder as ``calibration-queries.safetensors`` (float32, shape
(n, dim_in), key ``queries``); every later calibration of that index (a later ingest, the
service as the index grows) uses them instead of corpus vectors.

The file is written by an atomic rename, recorded with its SHA-256 in the manifest and read
without following links; its shape and values are checked on every load.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from slimvec.errors import PersistenceError
from slimvec.index.manifest import CALIBRATION_QUERIES_FILE
from slimvec.index.safefs import read_bytes_nofollow, refuse_link
from slimvec.persistence import fsync_dir

__all__ = ["CALIBRATION_QUERIES_FILE", "save_calibration_queries", "load_calibration_queries"]

_KEY = "queries"


def save_calibration_queries(folder: str | os.PathLike[str], queries: np.ndarray) -> Path:
    """Write ``queries`` (float32, (n, dim_in)) to the index folder by an atomic rename.

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    PersistenceError
        The folder is not writable or the disk is full.
    """
    from safetensors.numpy import save

    path = Path(folder) / CALIBRATION_QUERIES_FILE
    refuse_link(path)
    data = save({_KEY: np.ascontiguousarray(queries, dtype=np.float32)})
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        raise PersistenceError(f"Cannot write {path}: {exc.strerror or exc}. Check that the folder "
                               "is writable and the disk is not full.") from exc
    return path


def load_calibration_queries(folder: str | os.PathLike[str], dim_in: int) -> np.ndarray:
    """The stored calibration queries of an index, checked: float32 of shape (n >= 1, dim_in),
    finite.

    Raises
    ------
    LinkError
        The file is a symbolic link.
    PersistenceError
        Missing, unreadable, not safetensors, or of the wrong shape or values; the message names
        the file and says how to replace it.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load

    path = Path(folder) / CALIBRATION_QUERIES_FILE
    again = ("Run `slimvec calibrate --index ... --queries FILE` again to replace it, or delete "
             "it and the manifest's rescore.queries to calibrate on corpus vectors.")
    data = read_bytes_nofollow(path, again)
    try:
        arrays = load(data)
    except (SafetensorError, ValueError) as exc:
        raise PersistenceError(f"{path} is not a safetensors file ({exc}). {again}") from exc
    if _KEY not in arrays:
        raise PersistenceError(f"{path} holds no tensor {_KEY!r} (found {sorted(arrays)}). {again}")
    q = arrays[_KEY]
    if q.dtype != np.float32 or q.ndim != 2 or q.shape[0] < 1 or q.shape[1] != int(dim_in):
        raise PersistenceError(f"{path}: expected float32 query vectors of shape (n >= 1, {dim_in}), "
                               f"got {q.dtype} {q.shape}. {again}")
    if not np.isfinite(q).all():
        raise PersistenceError(f"{path}: holds NaN or infinite values. {again}")
    return q
