"""What comes in: a :class:`Document` to ingest, a :class:`Reject` (a row that cannot be, with
its reason) and a source file's :func:`fingerprint`.

The ground floor of the documents' side (issue 35): the readers and row checks of
:mod:`slimvec.sources.readers` make these, the connectors' vector readers
(:mod:`slimvec.connectors.reading`) report their own rejects and fingerprints with them, and the
pipeline records them; none of those needs to import another for it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Document", "Reject", "describe_changes", "fingerprint"]

_EDGE = 1 << 20


@dataclass
class Document:
    """One document to ingest.

    Attributes
    ----------
    id : str or int
        Source id (the id column's value, or a hash of the text when there is none).
    text : str
        The text to encode.
    payload : dict
        The row's other fields (kept in the store's payload next to the text).
    row : int
        0-based data row number in the source.
    line : int or None
        1-based line number in the file, when the format has lines.
    warnings : tuple of Reject
        Kept rejects for this row (ingested, but not exactly as written): a record spanning
        lines, a payload value made storable. Written to ``rejects.jsonl`` with ``kept: true``.
    id_from_text : bool
        The id is derived from the text (no id given).
    """

    id: str | int
    text: str
    payload: dict[str, Any] = field(default_factory=dict)
    row: int = 0
    line: int | None = None
    warnings: tuple[Reject, ...] = ()  # a tuple: no container per row on the hot path
    id_from_text: bool = False


@dataclass
class Reject:
    """A row that cannot be ingested, with the reason (written to ``rejects.jsonl``).

    ``kept`` marks a row that *was* ingested but not as written (text truncated by the tokenizer,
    an id seen before with other text): it is reported in ``rejects.jsonl`` and counted apart.
    """

    source: str
    row: int
    line: int | None
    field: str | None
    reason: str
    snippet: str = ""
    kept: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"source": self.source, "row": self.row, "line": self.line, "field": self.field,
                "reason": self.reason, "snippet": self.snippet, "kept": self.kept}


def fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Size, mtime and head / tail SHA-256 of a file (reads at most 2 MiB)."""
    p = Path(path)
    st = p.stat()
    head = hashlib.sha256()
    tail = hashlib.sha256()
    with open(p, "rb") as fh:
        head.update(fh.read(_EDGE))
        if st.st_size > _EDGE:
            fh.seek(max(_EDGE, st.st_size - _EDGE))
            tail.update(fh.read(_EDGE))
    return {"size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns),
            "head_sha256": head.hexdigest(), "tail_sha256": tail.hexdigest()}


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> str:
    """Human description of how two fingerprints differ (empty when equal)."""
    parts = []
    if old.get("size") != new.get("size"):
        parts.append(f"size {old.get('size')} -> {new.get('size')} bytes")
    if old.get("head_sha256") != new.get("head_sha256") or old.get("tail_sha256") != new.get(
            "tail_sha256"):
        parts.append("content differs")
    if old.get("mtime_ns") != new.get("mtime_ns"):
        parts.append("modification time differs")
    return ", ".join(parts)
