"""The documents of an index that is still collecting its fit sample, held in memory.

An index created over HTTP without a sample has no fitted reducer until ``fit_after`` documents
arrived; its rows wait in ``pending.jsonl`` (:class:`Journal`). The serving process holds that
folder's lock, so the file changes only through it: it is read once when the index opens, and
every later read (search, count, get, scroll, payloads) answers from :class:`PendingSearch`, the
rows in memory, without parsing the file again. A search is answered exactly, by cosine over the
rows' full vectors by the index's metric (:attr:`PendingSearch.metric`: cosine, inner product
or negated squared L2, as the built index will score; one matrix product over at most
``fit_after`` rows), so a new index is searchable from its first document; texts are encoded on
the first search after they arrived.

Writes are grouped: a write appends its rows (one ``write``: after it returns, a kill -9 of the
server cannot lose them) and the fsync that makes them survive a power cut is shared by every
write waiting for one (:meth:`Journal.sync`, a group commit); a ``wait=true`` write is answered
after it.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.ids import doc_ids
from slimvec.index.safefs import open_append_text, open_nofollow, read_bytes_nofollow

__all__ = ["PendingSearch", "Journal", "Synced", "row_vector", "vector_field"]

log = logging.getLogger(__name__)

#: a vector row's vector in ``pending.jsonl``: base64 of little-endian float32 (older files hold
#: ``"vector": [floats]``, still read); formatting and parsing float lists cost most of a write
#: and of reading the file
VECTOR_F32 = "vector_f32"


def vector_field(vec: np.ndarray) -> dict[str, str]:
    """The journal field of one full vector (exact float32)."""
    return {VECTOR_F32: base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")}


def row_vector(row: dict[str, Any]) -> np.ndarray:
    """The full vector of a vector row of ``pending.jsonl`` (either spelling)."""
    if VECTOR_F32 in row:
        return np.frombuffer(base64.b64decode(row[VECTOR_F32]), dtype="<f4").astype(np.float32)
    return np.asarray(row["vector"], dtype=np.float32)


class Journal:
    """``pending.jsonl``: appended by the one process holding the pending folder's lock, fsynced
    in groups.

    Parameters
    ----------
    path : Path
        The journal file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sync_lock = threading.Lock()
        self._written = 0  # appends done (each one ``write``)
        self._synced = 0  # appends known to be on disk
        self._retired = False

    def load(self) -> list[dict[str, Any]]:
        """The rows on disk, in order. A last line cut by a kill during its append (no newline,
        not JSON) was never acknowledged: it is dropped and cut from the file."""
        if not os.path.lexists(self.path):
            return []
        data = read_bytes_nofollow(self.path)
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        rows = [json.loads(x) for x in lines if x.strip()]
        if tail.strip():
            try:
                rows.append(json.loads(tail))
            except ValueError:
                log.warning("%s: dropping a last line cut by an interrupted append (%d bytes; "
                            "its write was never acknowledged)", self.path, len(tail))
                os.truncate(self.path, len(data) - len(tail))
        return rows

    def append(self, lines: Sequence[str]) -> int:
        """Append whole lines with one ``write`` (no fsync); returns the ticket :meth:`sync`
        takes. The caller holds the index's lock (appends never interleave)."""
        if lines:
            with open_append_text(self.path) as fh:
                fh.write("".join(x + "\n" for x in lines))
            self._written += 1
        return self._written

    def sync(self, ticket: int) -> None:
        """Return once append ``ticket`` is fsynced: one fsync covers every append written
        before it started (the writes waiting meanwhile share the next one)."""
        with self._sync_lock:
            if self._synced >= ticket or self._retired:
                return
            target = self._written
            fd = open_nofollow(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._synced = max(self._synced, target)

    def flush(self) -> None:
        """Fsync every append (on close); nothing to do when nothing was appended."""
        if self._written > self._synced and os.path.lexists(self.path):
            self.sync(self._written)

    def rewrite(self, lines: Sequence[str]) -> None:
        """Replace the file atomically (a temporary file, fsynced, renamed over it)."""
        with self._sync_lock:
            tmp = self.path.with_suffix(".tmp")
            fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write("".join(x + "\n" for x in lines))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            self._synced = self._written

    def retire(self) -> None:
        """The rows were committed into the fitted index (the file is removed): every wait ends."""
        with self._sync_lock:
            self._retired = True


class Synced:
    """The future of a write to a pending index: :meth:`result` returns once its rows are
    fsynced (group commit); a write answered without waiting is already safe from a kill -9."""

    def __init__(self, journal: Journal, ticket: int) -> None:
        self._journal, self._ticket = journal, ticket

    def result(self, timeout: float | None = None) -> None:
        self._journal.sync(self._ticket)


class PendingSearch:
    """The rows of ``pending.jsonl`` in memory, with their full vectors.

    Parameters
    ----------
    vectors_of : callable
        ``rows -> (n, d) float32``: encodes the rows' texts or decodes their vectors.
    rows : list of dict, optional
        The rows already on disk (:meth:`Journal.load`).
    """

    def __init__(self, vectors_of: Callable[[list[dict[str, Any]]], np.ndarray],
                 rows: list[dict[str, Any]] | None = None) -> None:
        self._vectors_of = vectors_of
        self._rows: list[dict[str, Any]] = []
        self._sids: list[int] = []
        self._latest: dict[int, int] = {}  # store id -> position of its last row
        self._vecs: np.ndarray | None = None  # vectors of the first len(_vecs) rows
        self._records: list[dict[str, Any]] | None = None
        self._unit: tuple[np.ndarray, np.ndarray] | None = None
        #: ``cosine``, ``ip`` or ``l2`` (scores as the stores give them: higher is closer)
        self.metric = "cosine"
        self.append(rows or [])

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Every row in journal order (read only)."""
        return self._rows

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Rows just appended to the journal (their vectors are computed on the next search)."""
        if not rows:
            return
        start = len(self._rows)
        sids = doc_ids([r["id"] for r in rows]).tolist()
        self._rows.extend(rows)
        self._sids.extend(sids)
        for j, sid in enumerate(sids):
            self._latest[sid] = start + j
        self._records, self._unit = None, None

    def replace(self, records: list[dict[str, Any]]) -> None:
        """The journal was rewritten with ``records`` (rows carrying their ``store_id``, one per
        id); vectors already computed are kept (no text is encoded again)."""
        old_vecs = None
        if self._vecs is not None and len(self._vecs) == len(self._rows):
            pos = [self._latest.get(int(r["store_id"]), -1) for r in records]
            if all(p >= 0 for p in pos):
                old_vecs = self._vecs[np.asarray(pos, dtype=np.int64)] if pos else None
        self._rows, self._sids, self._latest, self._vecs = [], [], {}, None
        self._records, self._unit = None, None  # append([]) keeps the caches: drop them here
        self.append([{k: v for k, v in r.items() if k != "store_id"} for r in records])
        self._vecs = old_vecs if records else None

    def sync(self) -> None:
        """Compute the vectors of rows that have none yet (texts are encoded here)."""
        done = 0 if self._vecs is None else len(self._vecs)
        new = self._rows[done:]
        if new:
            fresh = np.asarray(self._vectors_of(new), dtype=np.float32)
            self._vecs = fresh if self._vecs is None else np.vstack([self._vecs, fresh])
            self._unit = None

    def records(self) -> list[dict[str, Any]]:
        """The latest version of each row, in store-id order, each with its ``store_id`` (read
        only; cached until the rows change)."""
        if self._records is None:
            self._records = [{**self._rows[pos], "store_id": sid}
                             for sid, pos in sorted(self._latest.items())]
        return self._records

    def search(self, queries: np.ndarray, k: int, allowed: set[int] | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``k`` by :attr:`metric` over the latest version of each pending document (only the
        store ids in ``allowed`` when given: a filter's matches). Call :meth:`sync` first.

        Returns
        -------
        ids : ndarray of int64 (n, k)
            Store ids (as the built index will have them), padded with -1.
        scores : ndarray of float32 (n, k)
            Similarities (cosine, inner product, or negated squared L2), padded with NaN.
        """
        q = np.asarray(queries, dtype=np.float32)
        ids_out = np.full((len(q), k), -1, dtype=np.int64)
        scores_out = np.full((len(q), k), np.nan, dtype=np.float32)
        sids, X = self._unit_vectors()
        if allowed is not None:
            keep = np.isin(sids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            sids, X = sids[keep], X[keep]
        if not len(sids):
            return ids_out, scores_out
        sims = self._scores(q, X)
        top = min(k, len(sids))
        if top < len(sids):  # the top ``top`` unordered, then ordered (ties by position)
            part = np.argpartition(-sims, top - 1, axis=1)[:, :top]
            part.sort(axis=1)
            order = np.take_along_axis(part, np.argsort(-np.take_along_axis(sims, part, axis=1),
                                                        axis=1, kind="stable"), axis=1)
        else:
            order = np.argsort(-sims, axis=1, kind="stable")
        ids_out[:, :top] = sids[order]
        scores_out[:, :top] = np.take_along_axis(sims, order, axis=1)
        return ids_out, scores_out

    def _scores(self, q: np.ndarray, X: np.ndarray) -> np.ndarray:
        if self.metric == "cosine":
            return (q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)) @ X.T
        sims = q @ X.T
        if self.metric == "l2":
            sims = 2 * sims - (q * q).sum(axis=1)[:, None] - (X * X).sum(axis=1)[None, :]
        return sims

    def _unit_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """Store ids of the latest rows (in store-id order) and their vectors (cached): unit
        vectors for cosine, as given for ``ip`` and ``l2``."""
        if self._unit is None:
            if self._vecs is None or not self._latest:
                self._unit = (np.zeros(0, np.int64), np.zeros((0, 0), np.float32))
            else:
                items = sorted(self._latest.items())
                sids = np.asarray([s for s, _ in items], dtype=np.int64)
                X = self._vecs[np.asarray([p for _, p in items], dtype=np.int64)]
                if self.metric == "cosine":
                    X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
                self._unit = (sids, X)
        return self._unit

    def payloads(self, ids: list[int]) -> list[dict[str, Any] | None]:
        """Payloads of store ids as a built index returns them (``text`` and ``source_id``
        included), None for an unknown id."""
        out: list[dict[str, Any] | None] = []
        for sid in ids:
            pos = self._latest.get(int(sid))
            row = None if pos is None else self._rows[pos]
            out.append(None if row is None else {
                **(row.get("payload") or {}), "source_id": row["id"],
                **({"text": row["text"]} if "text" in row else {})})
        return out

    def count(self) -> int:
        """Pending documents (the latest version of each id)."""
        return len(self._latest)

    def vectors(self, ids: list[int]) -> np.ndarray:
        """Full vectors of store ids as written (zeros for an unknown id). Call :meth:`sync`
        first."""
        dim = 0 if self._vecs is None else self._vecs.shape[1]
        out = np.zeros((len(ids), dim), dtype=np.float32)
        for j, sid in enumerate(ids):
            pos = self._latest.get(int(sid))
            if pos is not None and self._vecs is not None:
                out[j] = self._vecs[pos]
        return out
