"""What a store can hold: the one payload check every row passes before it reaches a store.

Every producer (``slimvec ingest``, ``slimvec migrate``, the service's documents and vectors, the
Ray engine) hands its rows to :class:`~slimvec.indexer.builder.IndexBuilder`, whose
:func:`~slimvec.indexer.writer.write_batch` calls :func:`split_bad_payloads` before anything is
upserted; the service also calls it when a request arrives, so the request's answer lists its
rejects. A row is rejected (never acknowledged, never upserted) when its payload

- nests deeper than :data:`MAX_PAYLOAD_DEPTH` containers (Qdrant's serde recursion limit is 128:
  a 130-deep payload is written to the WAL, then the shard can never be opened again);
- has a key or a string that is not valid UTF-8 (a lone surrogate such as ``"k\\udc00"``: Qdrant
  Edge and SQLite refuse it halfway through a write);
- has a key that is not a string, or a value that is not JSON (bytes, sets, objects);
- is larger than :data:`MAX_PAYLOAD_BYTES` as UTF-8 JSON.

Values every store can hold after a change are kept with a warning (a *kept* reject), as the
ingest readers already did: float NaN / ±Infinity become ``null`` (not JSON), integers outside
int64 become their decimal string (Qdrant Edge turned ``10**29`` into the float ``1e+29``
without a word, FAISS and hnswlib kept it exact: now every store keeps the same string).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from slimvec.sources.readers import SNIPPET, Reject

__all__ = ["MAX_PAYLOAD_DEPTH", "MAX_PAYLOAD_BYTES", "RowProblem", "check_payload",
           "split_bad_payloads", "safe_text"]

MAX_PAYLOAD_DEPTH = 32
"""Most containers (objects / arrays) nested in one payload, the payload object included."""

MAX_PAYLOAD_BYTES = 1 << 20
"""Largest payload, as UTF-8 JSON (1 MiB; a document's text is part of its payload)."""

_INT64 = (-(1 << 63), (1 << 63) - 1)
_SCALAR_BYTES = 24  # a generous JSON length of a number / bool / null and its separators


class RowProblem(Exception):
    """A payload no store can hold: ``field`` (dotted path), ``reason``, ``snippet``."""

    def __init__(self, field: str | None, reason: str, snippet: str) -> None:
        super().__init__(reason)
        self.field, self.reason, self.snippet = field, reason, snippet


def safe_text(value: Any, limit: int = SNIPPET) -> str:
    """``value`` as printable UTF-8 text (lone surrogates escaped), cut to ``limit``: safe to put
    in a rejects file or a JSON answer."""
    s = value if isinstance(value, str) else repr(value)
    return s.encode("utf-8", "backslashreplace").decode("utf-8")[:limit]


def _utf8_len(s: str) -> int | None:
    try:
        return len(s.encode("utf-8"))
    except UnicodeEncodeError:
        return None


class _Walk:
    """One payload's walk: cleaned copy, byte estimate, notes."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self.nbytes = 0

    def value(self, v: Any, path: str, depth: int) -> Any:
        if v is None or isinstance(v, bool):
            self.nbytes += _SCALAR_BYTES
            return v
        if isinstance(v, str):
            n = _utf8_len(v)
            if n is None:
                raise RowProblem(path or None, "invalid UTF-8 (lone surrogate) in a payload value",
                                 safe_text(v))
            self.nbytes += n + 2
            return v
        if isinstance(v, (int, np.integer)):
            i = int(v)
            self.nbytes += _SCALAR_BYTES
            if not _INT64[0] <= i <= _INT64[1]:
                self.notes.append(f"payload field {path!r} is an integer beyond 64 bits: stored as "
                                  "a string")
                return str(i)
            return i
        if isinstance(v, (float, np.floating)):
            f = float(v)
            self.nbytes += _SCALAR_BYTES
            if f != f or f in (float("inf"), float("-inf")):
                self.notes.append(f"payload field {path!r} is {f!r}: stored as null")
                return None
            return f
        if isinstance(v, np.bool_):
            self.nbytes += _SCALAR_BYTES
            return bool(v)
        if isinstance(v, dict):
            return self.mapping(v, path, depth + 1)
        if isinstance(v, (list, tuple)):
            self._deep(path, depth + 1, v)
            return [self.value(x, path, depth + 1) for x in v]
        raise RowProblem(path or None, f"payload value of type {type(v).__name__} is not JSON "
                         "(expected null, a boolean, a number, a string, an array or an object)",
                         safe_text(v))

    def mapping(self, d: dict, path: str, depth: int) -> dict[str, Any]:
        self._deep(path, depth, d)
        out: dict[str, Any] = {}
        for k, v in d.items():
            if not isinstance(k, str):
                raise RowProblem(path or None, f"payload key {safe_text(k)} is a "
                                 f"{type(k).__name__}, expected a string", safe_text(k))
            n = _utf8_len(k)
            if n is None:
                raise RowProblem(f"{path}.{safe_text(k)}" if path else safe_text(k),
                                 "invalid UTF-8 (lone surrogate) in a payload key", safe_text(k))
            self.nbytes += n + 3
            out[k] = self.value(v, f"{path}.{k}" if path else k, depth)
        return out

    @staticmethod
    def _deep(path: str, depth: int, v: Any) -> None:
        if depth > MAX_PAYLOAD_DEPTH:
            raise RowProblem(path or None, f"payload nests deeper than {MAX_PAYLOAD_DEPTH} levels "
                             "(objects / arrays inside each other): no store can read it back; "
                             "flatten the field or store it as a JSON string",
                             "[...]" if isinstance(v, (list, tuple)) else "{...}")


def check_payload(payload: dict[str, Any] | None, notes: list[str]) -> dict[str, Any] | None:
    """A copy of ``payload`` that every store holds and reads back as written.

    Parameters
    ----------
    payload : dict or None
        One row's payload (``None``: no payload).
    notes : list of str
        Receives one line per value changed to be storable (NaN -> null, integer beyond int64 ->
        decimal string); the caller reports them as kept rejects.

    Returns
    -------
    dict or None

    Raises
    ------
    RowProblem
        The payload cannot be stored (too deep, not UTF-8, not JSON, too large): reject the row.
    """
    if payload is None:
        return None
    if not isinstance(payload, dict):
        raise RowProblem(None, f"payload is a {type(payload).__name__}, expected an object",
                         safe_text(payload))
    walk = _Walk(notes)
    out = walk.mapping(payload, "", 1)
    if walk.nbytes > MAX_PAYLOAD_BYTES // 8:  # only then is the exact JSON size worth its cost
        size = len(json.dumps(out, ensure_ascii=False).encode("utf-8"))
        if size > MAX_PAYLOAD_BYTES:
            raise RowProblem(None, f"payload is {size:,} bytes as JSON, over the limit of "
                             f"{MAX_PAYLOAD_BYTES:,} per row; shorten it or keep the large part "
                             "outside the index", safe_text(out))
    return out


def split_bad_payloads(payloads: Sequence[dict[str, Any] | None], rows: Sequence[int] | None,
                       lines: Sequence[int | None] | None, source: str
                       ) -> tuple[np.ndarray, list[dict[str, Any] | None], list[Reject]]:
    """Check each row's payload (:func:`check_payload`).

    Parameters
    ----------
    payloads : sequence of dict or None
    rows, lines : sequences, optional
        Source row / line of each payload (default: position in the batch).
    source : str
        Source name for the rejects.

    Returns
    -------
    good : ndarray of bool (n,)
        Rows whose payload can be stored.
    clean : list
        Storable payloads of the good rows, in order.
    rejects : list of Reject
        One per bad row, and one kept reject per value changed to be storable.
    """
    n = len(payloads)
    good = np.ones(n, dtype=bool)
    clean: list[dict[str, Any] | None] = []
    rejects: list[Reject] = []
    for i, p in enumerate(payloads):
        row = int(rows[i]) if rows is not None else i
        line = lines[i] if lines is not None else None
        notes: list[str] = []
        try:
            clean.append(check_payload(p, notes))
        except RowProblem as bad:
            good[i] = False
            rejects.append(Reject(source, row, line, bad.field, bad.reason, bad.snippet))
            continue
        rejects.extend(Reject(source, row, line, None, note, "", kept=True) for note in notes)
    return good, clean, rejects
