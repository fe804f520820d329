"""Row checks that need more than one row or more than the text: duplicates, length, vectors.

- :class:`DuplicateTracker` remembers (store id -> text hash, row) of one input in a small SQLite
  file in the index folder, committed with each checkpoint, so a resumed run still knows the rows
  before the crash. A later row with a known id and other text wins (it overwrites the store
  point) and is reported as a kept reject.
- :func:`truncation_rejects` counts tokens only for texts long enough to possibly exceed the
  model's maximum (a token is at least one UTF-8 byte), so short corpora pay nothing.
- :func:`split_bad_vectors` turns rows of a :class:`VectorBatch` with NaN / inf values, the
  wrong dimension, values that are not real numbers (strings, bools, complex, nested lists: never
  cast) or a norm far outside the batch's (:func:`norm_outliers`) into rejects (used by ingest,
  migrate and the service alike).
- :func:`check_vector_dtype` refuses a whole vector file (``.npy``, HDF5 dataset) whose dtype is
  not real numbers, in one line; :func:`npy_dtype` reads a ``.npy`` dtype from its header, so an
  object array is refused without being unpickled.
- :func:`norm_outliers` flags finite vectors whose norm is more than :data:`NORM_FACTOR` times
  above or below the median norm: one 1e10 row in a PCA fit sample ruins the projection, and
  3e38 overflows every score. Used on the migrate fit sample and on every streamed batch.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import ConfigError, PersistenceError
from slimvec.sources.readers import SNIPPET, Document, Reject

__all__ = ["DuplicateTracker", "truncation_rejects", "split_bad_vectors", "dedupe_last",
           "ranked_lengths", "most_common_length",
           "norm_outliers", "check_vector_dtype", "check_vector_column", "npy_dtype", "STATE_DB", "NORM_FACTOR"]

NORM_FACTOR = 1e3
#: the largest norm whose square float32 holds (3.4e38): a longer vector's scores are infinite
MAX_NORM = 1.8e19
_MIN_ROWS_FOR_NORMS = 3  # a median of fewer rows says nothing about what is typical

STATE_DB = ".ingest-state.sqlite"
_SPECIALS_MARGIN = 8  # room for [CLS]/[SEP]-like special tokens added by any tokenizer


def _text_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big",
                          signed=True)


class DuplicateTracker:
    """Ids seen so far in one input, persisted next to the index.

    Parameters
    ----------
    path : Path
        SQLite file (``INDEX/.ingest-state.sqlite``).
    fresh : bool
        Forget ids of an earlier input (a new run); a resumed run keeps them.
    """

    def __init__(self, path: Path, fresh: bool) -> None:
        self.path = path
        try:
            self.db = sqlite3.connect(str(path), isolation_level="DEFERRED")
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS seen (id INTEGER PRIMARY KEY, h INTEGER NOT NULL, "
                "row INTEGER NOT NULL)")
            if fresh:
                self.db.execute("DELETE FROM seen")
            self.db.commit()
        except sqlite3.Error as exc:
            raise PersistenceError(f"Cannot use the ingest state file {path}: {exc}.") from exc

    def check(self, ids: np.ndarray, docs: Sequence[Document], source: str,
              id_field: str | None) -> list[Reject]:
        """Record a batch; return kept rejects for ids seen before with other text."""
        known: dict[int, tuple[int, int]] = {}
        id_list = [int(i) for i in ids]
        for start in range(0, len(id_list), 500):
            chunk = id_list[start:start + 500]
            marks = ",".join("?" * len(chunk))
            for sid, h, row in self.db.execute(
                    f"SELECT id, h, row FROM seen WHERE id IN ({marks})", chunk):
                known[int(sid)] = (int(h), int(row))
        out: list[Reject] = []
        for sid, doc in zip(id_list, docs):
            h = _text_hash(doc.text)
            prev = known.get(sid)
            if prev is not None and prev[1] != doc.row:
                if prev[0] != h:
                    out.append(Reject(
                        source, doc.row, doc.line, id_field,
                        f"duplicate id {doc.id!r} with different text than row {prev[1]}: last "
                        f"wins (this row replaces it)", doc.text[:SNIPPET], kept=True))
                elif getattr(doc, "id_from_text", False):
                    out.append(Reject(
                        source, doc.row, doc.line, None,
                        f"duplicate id (no id given, same text as row {prev[1]}): one document; "
                        f"this row's other fields replace row {prev[1]}'s", doc.text[:SNIPPET],
                        kept=True))
            known[sid] = (h, doc.row)
        self.db.executemany("INSERT OR REPLACE INTO seen (id, h, row) VALUES (?, ?, ?)",
                            [(sid, h, row) for sid, (h, row) in known.items()])
        return out

    def commit(self) -> None:
        """Make the batches recorded so far durable (called at each checkpoint)."""
        self.db.commit()

    def close(self, delete: bool = False) -> None:
        """Close; ``delete`` removes the file (the input was ingested completely)."""
        self.db.close()
        if delete:
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)


def truncation_rejects(encoder: Any, docs: Sequence[Document], source: str,
                       text_field: str) -> list[Reject]:
    """Kept rejects for texts longer than the encoder's maximum sequence length.

    Only texts whose UTF-8 length could exceed the limit are tokenized.
    """
    limit = int(encoder.max_seq_length)
    long_docs = [d for d in docs if len(d.text.encode("utf-8")) > limit - _SPECIALS_MARGIN]
    if not long_docs:
        return []
    counts = _count_tokens(encoder, [d.text for d in long_docs])
    return [Reject(source, d.row, d.line, text_field,
                   f"text truncated to the model's maximum of {limit} tokens (it has {n})",
                   d.text[:SNIPPET], kept=True)
            for d, n in zip(long_docs, counts) if n > limit]


def _count_tokens(encoder: Any, texts: list[str]) -> list[int]:
    """Token counts without the tokenizer's 'longer than the maximum' warning (we report it)."""
    tok = getattr(getattr(encoder, "model", None), "tokenizer", None)
    if tok is None:
        return list(encoder.count_tokens(texts))
    enc = tok(texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    return [len(ids) for ids in enc]


def split_bad_vectors(vectors: Any, dim: int, rows: Sequence[int] | None, source: str,
                      lines: Sequence[int | None] | None = None, norms: bool = True
                      ) -> tuple[np.ndarray, np.ndarray, list[Reject]]:
    """Check vectors row by row.

    Parameters
    ----------
    vectors : ndarray (n, d) or sequence of 1-D arrays
        Possibly ragged input vectors.
    dim : int
        Expected dimension.
    rows, lines : sequences, optional
        Source row / line of each vector (default: position in the batch).
    source : str
        Source name for the rejects.
    norms : bool
        Also reject finite rows whose norm is far from the batch's (:func:`norm_outliers`):
        a check for corrupt rows of a file, which an API leaves off (whether a vector is
        accepted must not depend on the others sent with it; Qdrant takes any finite vector).

    Returns
    -------
    good : ndarray of bool (n,)
        Rows that can be ingested.
    clean : ndarray of float32 (n_good, dim)
    rejects : list of Reject
    """
    n = len(vectors)
    rows = list(range(n)) if rows is None else list(rows)
    lines = [None] * n if lines is None else list(lines)
    good = np.ones(n, dtype=bool)
    rejects: list[Reject] = []
    arr = _regular_array(vectors)
    if arr is not None and arr.ndim == 2 and arr.shape[1] == dim:
        finite = np.isfinite(arr).all(axis=1)
        for i in np.flatnonzero(~finite):
            good[i] = False
            rejects.append(Reject(source, rows[i], lines[i], "vector", "NaN or inf in vector",
                                  _vec_snippet(arr[i])))
        far, lengths, median = _norm_check(arr, finite)
        if not norms:  # only what no score can hold: a squared norm past float32's range
            far = finite & (lengths > MAX_NORM)
        for i in np.flatnonzero(far):
            good[i] = False
            why = (f"vector norm {lengths[i]:.3g} is over {NORM_FACTOR:g}x away from the batch's "
                   f"median norm {median:.3g}: likely corrupt" if norms else
                   f"vector norm {lengths[i]:.3g} is over {MAX_NORM:.3g}: its scores overflow "
                   "float32; scale the vector down")
            rejects.append(Reject(source, rows[i], lines[i], "vector", why, _vec_snippet(arr[i])))
        return good, np.ascontiguousarray(arr[good]), rejects
    clean = []
    for i, vec in enumerate(vectors):
        v, problem = _real_row(vec)
        if v is None:
            good[i] = False
            rejects.append(Reject(source, rows[i], lines[i], "vector", problem,
                                  repr(vec)[:SNIPPET]))
            continue
        if v.shape[0] != dim:
            good[i] = False
            rejects.append(Reject(source, rows[i], lines[i], "vector",
                                  f"wrong dimension: vector has {v.shape[0]}, index expects {dim}",
                                  _vec_snippet(v)))
        elif not np.isfinite(v).all():
            good[i] = False
            rejects.append(Reject(source, rows[i], lines[i], "vector", "NaN or inf in vector",
                                  _vec_snippet(v)))
        else:
            clean.append(v)
    out = np.stack(clean) if clean else np.zeros((0, dim), dtype=np.float32)
    return good, out, rejects


def norm_outliers(vectors: np.ndarray) -> np.ndarray:
    """Rows (bool mask) of finite vectors whose norm is over :data:`NORM_FACTOR` times above or
    below the median norm of the finite non-zero rows (robust: one outlier cannot move the
    median). Fewer than three such rows: nothing is flagged. Norms are computed in float64 so
    that 3e38 does not overflow.
    """
    arr = np.asarray(vectors)
    if arr.ndim != 2 or not len(arr):
        return np.zeros(len(arr), dtype=bool)
    return _norm_check(arr, np.isfinite(arr).all(axis=1))[0]


def _norm_check(arr: np.ndarray, finite: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    norms = np.zeros(len(arr))
    norms[finite] = np.linalg.norm(arr[finite].astype(np.float64), axis=1)
    usable = finite & (norms > 0)
    if usable.sum() < _MIN_ROWS_FOR_NORMS:
        return np.zeros(len(arr), dtype=bool), norms, 0.0
    median = float(np.median(norms[usable]))
    far = usable & ((norms > median * NORM_FACTOR) | (norms < median / NORM_FACTOR))
    return far, norms, median


_REAL_KINDS = "fiu"  # float, signed and unsigned integers: the only vector values taken
_NOT_REAL = "expected float or integer numbers"


def _regular_array(vectors: Any) -> np.ndarray | None:
    """float32 (n, d) when every row holds d real numbers, else ``None`` (checked row by row)."""
    if isinstance(vectors, np.ndarray):
        arr = vectors
    else:
        try:
            lengths = {len(v) for v in vectors} if len(vectors) else {0}
        except TypeError:
            return None
        if len(lengths) != 1:
            return None
        try:
            arr = np.asarray(vectors)
        except (TypeError, ValueError):
            return None
    if arr.dtype.kind not in _REAL_KINDS:  # strings, bools, complex, objects: row by row
        return None
    return np.asarray(arr, dtype=np.float32)


def _dtype_name(dtype: np.dtype) -> str:
    return {"U": "str", "S": "bytes", "b": "bool"}.get(dtype.kind, str(dtype))


def _real_row(vec: Any) -> tuple[np.ndarray | None, str]:
    """One row as a flat float32 vector, or ``None`` and why not.

    Only real numbers are taken: numpy would turn ``"0.5"`` into 0.5, ``True`` into 1.0 and
    ``1+2j`` into 1.0 (dropping the imaginary part); ``None`` becomes NaN (rejected as such).
    """
    try:
        a = np.asarray(vec)
    except (TypeError, ValueError):
        return None, "vector is not numeric (nested lists of different lengths?)"
    if a.dtype == object:
        odd = sorted({type(x).__name__ for x in a.ravel().tolist()
                      if x is not None and (isinstance(x, bool)
                                            or not isinstance(x, (int, float, np.integer, np.floating)))})
        if odd:
            return None, f"vector holds {', '.join(odd)} values, {_NOT_REAL}"
        try:
            a = np.asarray(vec, dtype=np.float32)
        except (TypeError, ValueError, OverflowError):
            return None, f"vector is not numeric, {_NOT_REAL}"
    elif a.dtype.kind not in _REAL_KINDS:
        return None, f"vector holds {_dtype_name(a.dtype)} values, {_NOT_REAL}"
    if a.ndim != 1:
        return None, (f"vector is nested (shape {a.shape}), expected one flat list of numbers")
    return a.astype(np.float32), ""


def _vec_snippet(v: np.ndarray) -> str:
    return np.array2string(v[:6], precision=3, separator=",")[:SNIPPET]


def dedupe_last(ids: np.ndarray) -> np.ndarray | None:
    """Indices keeping the last occurrence of each id in order, or None when ids are unique."""
    if len(np.unique(ids)) == len(ids):
        return None
    last: dict[int, int] = {}
    for i, v in enumerate(ids.tolist()):
        last[v] = i
    return np.array(sorted(last.values()), dtype=np.int64)


def _dtype_hint(dtype: np.dtype) -> str:
    kind = dtype.kind
    if kind == "c":
        return ("Complex numbers would lose their imaginary part: save np.real(X) or np.abs(X) "
                "as float32 if that is what you mean.")
    if kind == "b":
        return ("A bool array is a mask, not vectors: save X.astype(np.float32) if 0/1 vectors "
                "are meant.")
    if kind in "US":
        return "Numbers stored as text: convert them (X.astype(np.float32)) and save again."
    if kind == "O":
        return ("An object array holds pickled Python objects, which slimvec never unpickles: "
                "save np.asarray(X, dtype=np.float32).")
    if kind == "V":
        return "A structured array: save the vector field alone (X['FIELD'])."
    return "Save the vectors as float32."


def check_vector_dtype(dtype: np.dtype, where: str) -> None:
    """Refuse anything but real numbers: float or (signed / unsigned) integer dtypes.

    Bool is refused too (a mask saved by mistake is likelier than 0/1 vectors, and the fix is one
    ``astype``); so are complex (the imaginary part would be dropped), strings, objects, structured
    and date types.

    Parameters
    ----------
    dtype : numpy dtype
    where : str
        What holds it, e.g. ``"FILE: dtype"``; the message reads ``WHERE DTYPE found, expected ...``.

    Raises
    ------
    ConfigError
        One line naming ``where``, the dtype found, what is expected and what to do.
    """
    if dtype.kind in "fiu" and dtype.fields is None and not dtype.subdtype:
        return
    raise ConfigError(f"{where} {dtype} found, expected float or integer numbers (float32, "
                      f"float16, float64 or int). {_dtype_hint(dtype)}")


def npy_dtype(path: Path) -> np.dtype:
    """The dtype in a ``.npy`` header, read without loading (or unpickling) the array."""
    fmt = np.lib.format
    try:
        with open(path, "rb") as fh:
            version = fmt.read_magic(fh)
            if version == (1, 0):
                return fmt.read_array_header_1_0(fh)[2]
            if version == (2, 0):
                return fmt.read_array_header_2_0(fh)[2]
            return np.load(path, mmap_mode="r", allow_pickle=False).dtype
    except (ValueError, OSError) as exc:
        raise ConfigError(f"{path} is not a readable .npy array ({str(exc).splitlines()[0]}). "
                          "Save it with numpy.save(FILE, X) of a 2-D float32 array.") from exc


def check_vector_column(typ: Any, where: str, hint: str = "") -> None:
    """Refuse an Arrow vector column that is not one flat list of real numbers per row.

    Parameters
    ----------
    typ : pyarrow.DataType
        The column's type.
    where : str
        ``"FILE: column 'NAME'"``; the message reads ``WHERE is TYPE, expected ...``.
    hint : str
        What else the user can do (e.g. name another column).

    Raises
    ------
    ConfigError
        One line: nested lists, strings, bools, anything but a list of ints / floats.
    """
    import pyarrow as pa

    def is_list(t: Any) -> bool:
        return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)

    item = typ.value_type if is_list(typ) else None
    if item is not None and (pa.types.is_integer(item) or pa.types.is_floating(item)):
        return
    if item is not None and is_list(item):
        fix = "Flatten each row to one list of numbers."
    elif item is not None and pa.types.is_boolean(item):
        fix = "Bools are a mask, not vectors: cast the column to list<float> if 0/1 vectors are meant."
    elif pa.types.is_string(typ) or pa.types.is_large_string(typ) or (
            item is not None and (pa.types.is_string(item) or pa.types.is_large_string(item))):
        fix = "Numbers stored as text: cast the column to list<float> and write the file again."
    else:
        fix = "Cast the column to list<float>."
    raise ConfigError(f"{where} is {typ}, expected a list of float or integer numbers per row (one "
                      f"flat vector). {fix}{' ' + hint if hint else ''}")


def ranked_lengths(rows_by_length: dict[int, list[int]]) -> list[tuple[int, list[int]]]:
    """Vector lengths with the rows that have each, the most common first (a tie: the shorter
    first). The one rule migrate (a Parquet file's dimension) and the service (the first vectors
    of a new index) take a dimension by: the most common length, not row 0's, so one malformed
    first row does not make every good row a wrong-dimension reject (issue 23 item 8)."""
    return sorted(rows_by_length.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def most_common_length(lengths: Any) -> int | None:
    """The most common of an iterable of vector lengths (:func:`ranked_lengths`'s rule); None
    when it is empty."""
    rows: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        rows.setdefault(int(n), []).append(i)
    return ranked_lengths(rows)[0][0] if rows else None
