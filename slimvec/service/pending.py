"""Exact search over the documents of an index that is still collecting its fit sample.

An index created over HTTP without a sample has no fitted reducer until ``fit_after`` documents
arrived; its rows wait, fsynced, in ``pending.jsonl``. Until then a search is answered exactly, by
cosine over the rows' full vectors (the metric every built index uses), so a new index is
searchable from its first document. The rows are few by construction (at most ``fit_after``), and
their vectors are computed once: texts are encoded on the first search after they arrived.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from slimvec.ids import doc_ids

__all__ = ["PendingSearch"]


class PendingSearch:
    """Full vectors of the pending rows, kept in step with ``pending.jsonl``.

    Parameters
    ----------
    vectors_of : callable
        ``rows -> (n, d) float32``: encodes the rows' texts or stacks their vectors.
    """

    def __init__(self, vectors_of: Callable[[list[dict[str, Any]]], np.ndarray]) -> None:
        self._vectors_of = vectors_of
        self._rows: list[dict[str, Any]] = []
        self._vecs: np.ndarray | None = None

    def sync(self, rows: list[dict[str, Any]]) -> None:
        """Take the pending rows as they are on disk; only rows not seen before are encoded."""
        if len(rows) < len(self._rows):  # the file was replaced (fit, flush): start again
            self._rows, self._vecs = [], None
        new = rows[len(self._rows):]
        if new:
            fresh = np.asarray(self._vectors_of(new), dtype=np.float32)
            self._vecs = fresh if self._vecs is None else np.vstack([self._vecs, fresh])
            self._rows = list(rows)

    def search(self, queries: np.ndarray, k: int, allowed: set[int] | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Exact cosine top-``k`` over the latest version of each pending document (only the
        store ids in ``allowed`` when given: a filter's matches).

        Returns
        -------
        ids : ndarray of int64 (n, k)
            Store ids (as the built index will have them), padded with -1.
        scores : ndarray of float32 (n, k)
            Cosine similarities, padded with NaN.
        """
        q = np.asarray(queries, dtype=np.float32)
        ids_out = np.full((len(q), k), -1, dtype=np.int64)
        scores_out = np.full((len(q), k), np.nan, dtype=np.float32)
        latest = self._latest()
        if allowed is not None:
            latest = {sid: pos for sid, pos in latest.items() if sid in allowed}
        if not latest:
            return ids_out, scores_out
        sids = np.fromiter(latest, dtype=np.int64, count=len(latest))
        X = self._vecs[np.fromiter(latest.values(), dtype=np.int64, count=len(latest))]
        X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
        qn = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        sims = qn @ X.T
        top = min(k, len(sids))
        order = np.argsort(-sims, axis=1, kind="stable")[:, :top]
        ids_out[:, :top] = sids[order]
        scores_out[:, :top] = np.take_along_axis(sims, order, axis=1)
        return ids_out, scores_out

    def payloads(self, ids: list[int]) -> list[dict[str, Any] | None]:
        """Payloads of store ids as a built index returns them (``text`` and ``source_id``
        included), None for an unknown id."""
        latest = self._latest()
        out: list[dict[str, Any] | None] = []
        for sid in ids:
            pos = latest.get(int(sid))
            row = None if pos is None else self._rows[pos]
            out.append(None if row is None else {
                **(row.get("payload") or {}), "source_id": row["id"],
                **({"text": row["text"]} if "text" in row else {})})
        return out

    def count(self) -> int:
        """Pending documents (the latest version of each id)."""
        return len(self._latest())

    def vectors(self, ids: list[int]) -> np.ndarray:
        """Full vectors of store ids as written (zeros for an unknown id)."""
        latest = self._latest()
        dim = 0 if self._vecs is None else self._vecs.shape[1]
        out = np.zeros((len(ids), dim), dtype=np.float32)
        for j, sid in enumerate(ids):
            if int(sid) in latest:
                out[j] = self._vecs[latest[int(sid)]]
        return out

    def _latest(self) -> dict[int, int]:
        """Store id -> position of its last row (a later row with an id replaces an earlier)."""
        if self._vecs is None:
            return {}
        return {sid: pos for pos, sid in enumerate(doc_ids([r["id"] for r in self._rows]).tolist())}
