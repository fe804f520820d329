"""Row checks of documents and vectors a caller gives (an HTTP request, ``LocalIndex.add``) rather
than a file: checked when they arrive, so the answer lists the rejects and the writer never sees
them: the shared text check of the ingest readers
(:func:`slimvec.sources.readers.text_problem`), the shared payload check
(:func:`slimvec.sources.rowcheck.check_payload`) and the shared vector check
(:func:`slimvec.sources.checks.split_bad_vectors`, without the batch-relative norm check: any
finite vector of the right dimension is taken, as Qdrant takes it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from slimvec.errors import ConfigError
from slimvec.ids import text_key
from slimvec.sources.checks import most_common_length, split_bad_vectors
from slimvec.sources.readers import Document, Reject, text_problem
from slimvec.sources.rowcheck import RowProblem, check_payload, safe_text

__all__ = ["check_docs", "check_vectors", "common_dim"]


def _storable(payload: dict[str, Any], source: str, row: int, rejects: list[Reject],
              changed: list[Reject]) -> dict[str, Any] | None:
    """``payload`` as every store holds it (:func:`slimvec.sources.rowcheck.check_payload`), or
    ``None`` after adding the row's reject: checked when the request arrives, so its answer lists
    the row and the writer never sees it."""
    notes: list[str] = []
    try:
        clean = check_payload(payload, notes)
    except RowProblem as bad:
        rejects.append(Reject(source, row, None, bad.field, bad.reason, bad.snippet))
        return None
    changed.extend(Reject(source, row, None, None, n, "", kept=True) for n in notes)
    return clean


def check_docs(docs: list[dict[str, Any]], source: str
                ) -> tuple[list[Document], list[Reject], list[Reject]]:
    """Good documents (payloads made storable), rejects, and kept warnings of changed values."""
    good: list[Document] = []
    rejects: list[Reject] = []
    changed: list[Reject] = []
    for i, d in enumerate(docs):
        text = d.get("text")
        problem = text_problem(text)  # the ingest readers' check: the same reasons
        if problem or not isinstance(text, str):
            rejects.append(Reject(source, i, None, "text", problem or "text is not a string",
                                  safe_text(text)))
            continue
        did = d.get("id")
        if did is None or (isinstance(did, str) and not did.strip()):
            did = text_key(text)
        payload = _storable({**(d.get("payload") or {}), "text": text, "source_id": did}, source,
                            i, rejects, changed)
        if payload is None:
            continue
        payload.pop("text")
        payload.pop("source_id")
        good.append(Document(did, text, payload, row=i))
    return good, rejects, changed


def common_dim(items: list[dict[str, Any]]) -> int:
    """The most common vector length of a request (not its first row's: one malformed first row
    would make every good row a wrong-dimension reject, as issue 23 item 8 found in migrate)."""
    dim = most_common_length(len(it["vector"]) for it in items
                             if isinstance(it.get("vector"), list) and it["vector"])
    if dim is None:
        raise ConfigError("No vector in the request to tell the index's input dimension from.")
    return dim


def check_vectors(items: list[dict[str, Any]], dim: int, source: str
                   ) -> tuple[list[int], np.ndarray, list[Reject], list[dict[str, Any]],
                              list[Reject]]:
    """Rows to write, their vectors, rejects, their storable payloads (with ``source_id``) and
    kept warnings of changed payload values."""
    rejects: list[Reject] = []
    changed: list[Reject] = []
    payloads: dict[int, dict[str, Any]] = {}
    for i, it in enumerate(items):
        p = _storable({**(it.get("payload") or {}), "source_id": it.get("id")}, source, i,
                      rejects, changed)
        if p is not None:
            payloads[i] = p
    rows = sorted(payloads)
    ok, clean, bad = split_bad_vectors([items[i].get("vector") or [] for i in rows], dim, rows,
                                       source, norms=False)
    good = [i for i, g in zip(rows, ok) if g]
    rejects = sorted(rejects + bad, key=lambda r: r.row)
    return good, clean, rejects, [payloads[i] for i in good], changed

