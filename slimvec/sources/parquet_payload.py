"""Parquet columns made storable as payload, one record batch at a time (vectorised).

Stores take JSON-like payloads. Arrow types without a JSON form would vanish from the payload
(``datetime``, ``Decimal``, ``bytes`` are not JSON): timestamps, dates, times, durations and
decimals become their ISO / decimal strings; binary columns become strings when they are valid
UTF-8 and are otherwise left out with a logged warning naming them. Columns that may hold values a
store cannot keep (float NaN / ±Infinity, integers beyond int64, nested values) are returned as
*suspects* so the reader cleans only those, row by row, and only in batches where a vectorised
check found something. :func:`parquet_rows` reads a file's row count from its metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["payload_columns", "parquet_rows"]

log = logging.getLogger(__name__)
_WARNED: set[tuple[str, str]] = set()
_INT64_MAX = (1 << 63) - 1


def _as_string(col: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    try:
        return pc.cast(col, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _warn_once(path: str, name: str, message: str) -> None:
    if (path, name) not in _WARNED:
        _WARNED.add((path, name))
        log.warning("%s: column %r %s", path, name, message)


def payload_columns(batch: pa.RecordBatch, path: Any, keep: Iterable[str] = ()
                    ) -> tuple[pa.RecordBatch, list[str]]:
    """Return ``(batch with storable columns, names of columns to clean row by row)``.

    Parameters
    ----------
    batch : pyarrow.RecordBatch
    path : str or Path
        The file, for warnings.
    keep : iterable of str
        Columns passed through untouched (the text column is checked elsewhere).
    """
    keep = set(keep)
    arrays, names, suspects = [], [], []
    for name, col in zip(batch.schema.names, batch.columns):
        t = col.type
        if name in keep:
            pass
        elif (pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t)
              or pa.types.is_duration(t) or pa.types.is_decimal(t)):
            as_str = _as_string(col)
            if as_str is None:
                _warn_once(str(path), name, f"of type {t} cannot be stored as payload: left out")
                continue
            col = as_str
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            as_str = _as_string(col)
            if as_str is None:
                _warn_once(str(path), name, "holds binary (not UTF-8) values, which a payload "
                           "cannot store: left out")
                continue
            col = as_str
        elif pa.types.is_floating(t):
            if len(col) and pc.any(pc.invert(pc.is_finite(col))).as_py():
                suspects.append(name)
        elif pa.types.is_uint64(t):
            top = pc.max(col).as_py()
            if top is not None and top > _INT64_MAX:
                suspects.append(name)
        elif pa.types.is_nested(t):
            suspects.append(name)
        arrays.append(col)
        names.append(name)
    if len(names) != batch.num_columns or any(a is not c for a, c in zip(arrays, batch.columns)):
        batch = pa.RecordBatch.from_arrays(arrays, names=names)
    return batch, suspects


def parquet_rows(path: str) -> int | None:
    """The data rows of a Parquet file from its row groups' metadata (``num_rows``), without
    reading them: an ingest's progress total and ETA (issue 52). ``None`` when unreadable (the
    reader names the problem when it opens the file)."""
    import pyarrow.parquet as pq

    try:
        return int(pq.ParquetFile(path).metadata.num_rows)
    except Exception:  # noqa: BLE001 - pyarrow raises several types for a bad file
        return None
