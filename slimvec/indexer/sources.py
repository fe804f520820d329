"""Stream documents from JSONL, CSV/TSV, Parquet and plain-text files, batch by batch.

Memory stays flat however big the file: rows are read lazily (Parquet with
``pyarrow.parquet.ParquetFile.iter_batches``). Each data row yields either a :class:`Document` or a
:class:`Reject` (with the file, row, line, field, reason and a snippet) so that a bad row never stops
a large run and is never silently dropped. Problems that make the whole file unusable (a missing
text or id column, an unknown format) raise :class:`~slimvec.errors.ConfigError` at once, naming
the columns that exist.

Rows are numbered from 0 in data order (header excluded); ``line`` is the 1-based line number in the
file where one exists (JSONL, text, CSV start line).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from slimvec.errors import ConfigError
from slimvec.ids import text_key

__all__ = ["Document", "Reject", "SourceSpec", "iter_records", "iter_batches", "detect_format",
           "FORMATS"]

FORMATS = ("jsonl", "csv", "tsv", "parquet", "text")
_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv",
           ".tab": "tsv", ".parquet": "parquet", ".pq": "parquet", ".txt": "text", ".text": "text"}
SNIPPET = 80


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
    """

    id: str | int
    text: str
    payload: dict[str, Any] = field(default_factory=dict)
    row: int = 0
    line: int | None = None


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


@dataclass(frozen=True)
class SourceSpec:
    """Where and how to read documents.

    Parameters
    ----------
    path : str
        Input file.
    text_column : str
        Column / key holding the text (ignored for plain text).
    id_column : str or None
        Column / key holding the id. ``None`` uses ``id`` when present and otherwise a hash of the
        text; a column named explicitly must exist.
    format : str or None
        One of ``jsonl, csv, tsv, parquet, text``; ``None`` detects it from the suffix.
    """

    path: str
    text_column: str = "text"
    id_column: str | None = None
    format: str | None = None


def detect_format(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """Format name from ``fmt`` or the file suffix (``.gz`` not supported)."""
    if fmt:
        if fmt not in FORMATS:
            raise ConfigError(f"Unknown input format {fmt!r}. Known: {', '.join(FORMATS)}.")
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix not in _SUFFIX:
        raise ConfigError(
            f"Cannot tell the format of {path} from its suffix {suffix!r}. Use one of "
            f"{', '.join(sorted(_SUFFIX))} or pass --format ({', '.join(FORMATS)})."
        )
    return _SUFFIX[suffix]


def _snippet(text: Any) -> str:
    s = text if isinstance(text, str) else repr(text)
    s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    return s[:SNIPPET]


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _text_problem(text: Any) -> str | None:
    if text is None:
        return "missing text"
    if not isinstance(text, str):
        return f"text is {type(text).__name__}, expected a string"
    if _has_surrogates(text):
        return "invalid UTF-8"
    if "\x00" in text:
        return "NUL byte in text"
    if not text.strip():
        return "empty or whitespace-only text"
    return None


class _RowChecker:
    """Turns a parsed row (dict) into a Document or a Reject."""

    def __init__(self, spec: SourceSpec, columns: list[str] | None) -> None:
        self.spec = spec
        self.source = str(spec.path)
        self.id_column = spec.id_column
        self.id_explicit = spec.id_column is not None
        if columns is not None:
            self._check_columns(columns)
            if self.id_column is None and "id" in columns:
                self.id_column = "id"

    def _check_columns(self, columns: list[str]) -> None:
        missing = [c for c in (self.spec.text_column, self.spec.id_column)
                   if c is not None and c not in columns]
        if missing:
            raise ConfigError(
                f"{self.source}: column(s) {', '.join(map(repr, missing))} not found. Columns "
                f"present: {', '.join(map(repr, columns)) or '(none)'}. Pass --text-column / "
                "--id-column to pick others."
            )

    def check(self, row: int, line: int | None, record: dict[str, Any]) -> Document | Reject:
        text = record.get(self.spec.text_column)
        problem = _text_problem(text)
        if problem:
            return Reject(self.source, row, line, self.spec.text_column, problem, _snippet(text))
        payload = {k: v for k, v in record.items() if k not in (self.spec.text_column,)}
        for key, value in payload.items():
            if isinstance(value, str) and (_has_surrogates(value) or "\x00" in value):
                return Reject(self.source, row, line, key, "invalid UTF-8 or NUL byte in field",
                              _snippet(value))
        if self.id_column is not None:
            doc_id = record.get(self.id_column)
            if doc_id is None or (isinstance(doc_id, str) and not doc_id.strip()):
                if not self.id_explicit:  # implicit 'id' key: fall back to the text hash
                    return Document(text_key(text), text, payload, row, line)
                return Reject(self.source, row, line, self.id_column, "missing id", _snippet(text))
            if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
                doc_id = str(doc_id)
        else:
            doc_id = text_key(text)
        return Document(doc_id, text, payload, row, line)


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    with open(path, "rb") as raw:
        wrapper = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="")
        for lineno, line in enumerate(wrapper, start=1):
            yield lineno, line.rstrip("\r\n")


def _iter_jsonl(spec: SourceSpec) -> Iterator[Document | Reject]:
    checker = _RowChecker(spec, None)
    row = -1
    for lineno, line in _text_lines(Path(spec.path)):
        if not line.strip():
            continue  # blank lines separate nothing in JSONL; they are not rows
        row += 1
        if _has_surrogates(line):
            yield Reject(checker.source, row, lineno, None, "invalid UTF-8", _snippet(line))
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            yield Reject(checker.source, row, lineno, None, f"malformed JSON: {exc.msg}",
                         _snippet(line))
            continue
        if not isinstance(record, dict):
            yield Reject(checker.source, row, lineno, None,
                         f"JSON line is a {type(record).__name__}, expected an object", _snippet(line))
            continue
        if row == 0:
            _first_record_columns(checker, record)
        yield checker.check(row, lineno, record)


def _first_record_columns(checker: _RowChecker, record: dict[str, Any]) -> None:
    """On the first JSON object, fail fast when the text / id key is absent everywhere."""
    cols = list(record)
    if checker.spec.text_column not in record or (
        checker.spec.id_column is not None and checker.spec.id_column not in record
    ):
        checker._check_columns(cols)
    if checker.id_column is None and "id" in record:
        checker.id_column = "id"


def _iter_delimited(spec: SourceSpec, delimiter: str) -> Iterator[Document | Reject]:
    path = Path(spec.path)
    with open(path, "rb") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="")
        reader = csv.reader(text, delimiter=delimiter)
        try:
            header = next(reader)
        except StopIteration:
            return
        header = [h.strip() for h in header]
        if header and header[0].startswith("\ufeff"):
            header[0] = header[0][1:]
        checker = _RowChecker(spec, header)
        row = -1
        line_start = reader.line_num + 1
        for fields in reader:
            lineno = line_start
            line_start = reader.line_num + 1
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            row += 1
            if len(fields) != len(header):
                yield Reject(checker.source, row, lineno, None,
                             f"ragged row: {len(fields)} field(s), header has {len(header)}",
                             _snippet(delimiter.join(fields)))
                continue
            yield checker.check(row, lineno, dict(zip(header, fields)))


def _iter_parquet(spec: SourceSpec, batch_rows: int = 4096) -> Iterator[Document | Reject]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(spec.path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise ConfigError(f"{spec.path} is not a readable Parquet file: {exc}.") from exc
    checker = _RowChecker(spec, list(pf.schema_arrow.names))
    row = -1
    for batch in pf.iter_batches(batch_size=batch_rows):
        for record in batch.to_pylist():
            row += 1
            yield checker.check(row, None, record)


def _iter_text(spec: SourceSpec) -> Iterator[Document | Reject]:
    checker = _RowChecker(SourceSpec(spec.path, "text", None, "text"), None)
    row = -1
    for lineno, line in _text_lines(Path(spec.path)):
        if not line.strip():
            continue
        row += 1
        yield checker.check(row, lineno, {"text": line})


def iter_records(spec: SourceSpec) -> Iterator[Document | Reject]:
    """Yield every data row of ``spec.path`` as a :class:`Document` or a :class:`Reject`.

    Raises
    ------
    ConfigError
        Missing file, unknown format, missing text / id column.
    """
    path = Path(spec.path)
    if not path.is_file():
        raise ConfigError(f"Input file {path} does not exist or is not a file.")
    fmt = detect_format(path, spec.format)
    if fmt == "jsonl":
        return _iter_jsonl(spec)
    if fmt == "csv":
        return _iter_delimited(spec, ",")
    if fmt == "tsv":
        return _iter_delimited(spec, "\t")
    if fmt == "parquet":
        return _iter_parquet(spec)
    return _iter_text(spec)


def iter_batches(spec: SourceSpec, batch_size: int = 256, start_row: int = 0
                 ) -> Iterator[tuple[list[Document], list[Reject], int]]:
    """Group records into batches of up to ``batch_size`` rows.

    Yields ``(documents, rejects, next_row)`` where ``next_row`` is the row number to resume
    from once this batch is committed. Rows before ``start_row`` are skipped.
    """
    docs: list[Document] = []
    rejects: list[Reject] = []
    next_row = start_row
    for rec in iter_records(spec):
        if rec.row < start_row:
            continue
        (docs if isinstance(rec, Document) else rejects).append(rec)
        next_row = rec.row + 1
        if len(docs) + len(rejects) >= batch_size:
            yield docs, rejects, next_row
            docs, rejects = [], []
    if docs or rejects:
        yield docs, rejects, next_row
