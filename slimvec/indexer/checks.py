"""Row checks that need more than one row or more than the text: duplicates, length, vectors.

- :class:`DuplicateTracker` remembers (store id -> text hash, row) of one input in a small SQLite
  file in the index folder, committed with each checkpoint, so a resumed run still knows the rows
  before the crash. A later row with a known id and other text wins (it overwrites the store
  point) and is reported as a kept reject.
- :func:`truncation_rejects` counts tokens only for texts long enough to possibly exceed the
  model's maximum (a token is at least one UTF-8 byte), so short corpora pay nothing.
- :func:`split_bad_vectors` turns rows of a :class:`VectorBatch` with NaN / inf values or the
  wrong dimension into rejects (used by ingest and migrate alike).
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from slimvec.errors import PersistenceError
from slimvec.indexer.sources import SNIPPET, Document, Reject

__all__ = ["DuplicateTracker", "truncation_rejects", "split_bad_vectors", "dedupe_last",
           "STATE_DB"]

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
            if prev is not None and prev[0] != h and prev[1] != doc.row:
                out.append(Reject(
                    source, doc.row, doc.line, id_field,
                    f"duplicate id {doc.id!r} with different text than row {prev[1]}: last wins "
                    f"(this row replaces it)", doc.text[:SNIPPET], kept=True))
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
                      lines: Sequence[int | None] | None = None
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
    arr = np.asarray(vectors, dtype=np.float32) if _is_regular(vectors) else None
    if arr is not None and arr.ndim == 2 and arr.shape[1] == dim:
        finite = np.isfinite(arr).all(axis=1)
        for i in np.flatnonzero(~finite):
            good[i] = False
            rejects.append(Reject(source, rows[i], lines[i], "vector", "NaN or inf in vector",
                                  _vec_snippet(arr[i])))
        return good, np.ascontiguousarray(arr[good]), rejects
    clean = []
    for i, vec in enumerate(vectors):
        try:
            v = np.asarray(vec, dtype=np.float32).ravel()
        except (TypeError, ValueError):
            good[i] = False
            rejects.append(Reject(source, rows[i], lines[i], "vector", "vector is not numeric",
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


def _is_regular(vectors: Any) -> bool:
    if isinstance(vectors, np.ndarray):
        return vectors.dtype != object
    lengths = {len(v) for v in vectors} if len(vectors) else {0}
    return len(lengths) == 1


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
