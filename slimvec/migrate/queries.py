"""Query vectors from a file, for searching an index built from vectors (``search --vectors``).

A migrated index has no encoder unless one was recorded at migrate: its queries are vectors from
the original encoder. They come from a ``.npy`` (n, dim) array (never unpickled) or a JSONL file
with one vector per line: a JSON list of numbers or an object with a ``vector`` field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from slimvec.errors import ConfigError
from slimvec.sources.checks import check_vector_dtype, npy_dtype, split_bad_vectors

__all__ = ["read_query_vectors"]


def read_query_vectors(path: str | os.PathLike[str], dim: int | None = None) -> np.ndarray:
    """Read query vectors from ``.npy`` or ``.jsonl``.

    Parameters
    ----------
    path : path
        The file.
    dim : int, optional
        Expected dimension (the index's input dimension); checked when given.

    Returns
    -------
    ndarray of float32, shape (n, dim)

    Raises
    ------
    ConfigError
        A missing or empty file, another format, values that are not real numbers, NaN / inf, or
        another dimension; the message names the file and the line or row.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Query vectors file {path} does not exist.")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        check_vector_dtype(npy_dtype(path), f"{path}: dtype")
        arr = np.load(path, allow_pickle=False)
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2:
            raise ConfigError(f"{path}: expected a 2-D (n, dim) array of query vectors, got shape "
                              f"{arr.shape}.")
        rows: list = list(arr)
        where = [f"{path} row {i}" for i in range(len(rows))]
    elif suffix in (".jsonl", ".ndjson"):
        rows, where = [], []
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{path} line {n}: not JSON ({exc.msg}). Write one vector "
                                      "per line: [0.1, 0.2, ...] or {\"vector\": [...]}.") from None
                rows.append(item.get("vector") if isinstance(item, dict) else item)
                where.append(f"{path} line {n}")
    else:
        raise ConfigError(f"Query vectors file {path}: expected .npy or .jsonl, got "
                          f"{suffix or 'no suffix'}.")
    if not rows:
        raise ConfigError(f"{path} holds no query vectors.")
    want = dim if dim is not None else len(np.ravel(rows[0])) if rows[0] is not None else 0
    good, clean, rejects = split_bad_vectors([r if r is not None else [] for r in rows], want,
                                             list(range(len(rows))), str(path))
    if rejects:
        r = rejects[0]
        if dim is not None and r.reason.startswith("wrong dimension"):
            raise ConfigError(f"{where[r.row]}: query vector of the wrong dimension: expected "
                              f"dimension {dim}, got {len(np.ravel(rows[r.row]))}. Queries must "
                              "come from the index's original encoder.")
        raise ConfigError(f"{where[r.row]}: {r.reason}. Query vectors must be flat lists of "
                          f"{want} finite numbers.")
    return clean
