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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slimvec.documents import Document, Reject
from slimvec.errors import ConfigError
from slimvec.ids import text_key

__all__ = ["Document", "Reject", "SourceSpec", "iter_records", "iter_batches", "detect_format",
           "FORMATS", "refuse_duplicate_columns", "clean_payload", "stored_payload"]

FORMATS = ("jsonl", "csv", "tsv", "parquet", "text")
_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv",
           ".tab": "tsv", ".parquet": "parquet", ".pq": "parquet", ".txt": "text", ".text": "text"}
SNIPPET = 80


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
    quoting : str or None
        TSV only: ``None`` (default) reads IANA TSV, where a quote is an ordinary character and
        every line is one record; ``"csv"`` reads CSV-style quoted fields (which may span lines).
    """

    path: str
    text_column: str = "text"
    id_column: str | None = None
    format: str | None = None
    quoting: str | None = None

    def __post_init__(self) -> None:
        if self.quoting not in (None, "none", "csv"):
            raise ConfigError(f"Unknown quoting {self.quoting!r}: use 'none' (IANA TSV) or 'csv'.")


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


#: the text check every producer shares (the service's documents too): the reason, or None
text_problem = _text_problem


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
        elif self.id_column is None:
            self.id_column = "id"  # JSONL: each object's own 'id' key when it has one

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
                    return Document(text_key(text), text, payload, row, line, id_from_text=True)
                return Reject(self.source, row, line, self.id_column, "missing id", _snippet(text))
            if isinstance(doc_id, float) and doc_id != doc_id:
                return Reject(self.source, row, line, self.id_column, "id is NaN", _snippet(text))
            if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
                doc_id = str(doc_id) if not isinstance(doc_id, float) else doc_id
            elif isinstance(doc_id, int) and not -(1 << 63) <= doc_id < (1 << 63):
                doc_id = str(doc_id)  # no store keeps integers beyond 64 bits exactly
        else:
            return Document(text_key(text), text, payload, row, line, id_from_text=True)
        return Document(doc_id, text, payload, row, line)


_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32-LE"), (b"\x00\x00\xfe\xff", "UTF-32-BE"),
         (b"\xff\xfe", "UTF-16-LE"), (b"\xfe\xff", "UTF-16-BE"))
_UTF8_BOM = b"\xef\xbb\xbf"


def _check_encoding(path: Path, head: bytes) -> bool:
    """Refuse UTF-16/32 input (by BOM or NUL-interleaved ASCII); True when a UTF-8 BOM leads."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            raise ConfigError(
                f"{path} is {name} encoded (byte-order mark {bom.hex()}); slimvec reads UTF-8. "
                f"Convert it first, e.g. iconv -f {name} -t UTF-8 {path} > {path.stem}.utf8"
                f"{path.suffix}.")
    sample = head[:64]
    if len(sample) >= 4 and sample.count(0) * 3 >= len(sample):
        raise ConfigError(
            f"{path} looks UTF-16 or UTF-32 encoded (every other byte is NUL); slimvec reads "
            "UTF-8. Convert it first, e.g. with iconv -t UTF-8.")
    return head.startswith(_UTF8_BOM)


def _open_lines(path: Path) -> io.TextIOWrapper:
    """The file as decoded physical lines split on ``\n`` only (a lone ``\r`` does not end a
    line; line endings are returned untranslated). A UTF-8 BOM is skipped; UTF-16/32 input is
    refused with a clear error; invalid UTF-8 bytes become lone surrogates (rejected per row)."""
    raw = open(path, "rb")
    try:
        has_bom = _check_encoding(path, raw.read(64))
        raw.seek(len(_UTF8_BOM) if has_bom else 0)
    except BaseException:
        raw.close()
        raise
    return io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="\n")


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    with _open_lines(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.endswith("\n"):
                line = line[:-2] if line.endswith("\r\n") else line[:-1]
            yield lineno, line


class _JsonFlags:
    """Set by the JSON parser hooks when a line holds NaN / Infinity or a huge integer."""

    odd = False


def _parse_constant(name: str) -> float:
    _JsonFlags.odd = True
    return float(name)


def _parse_int(digits: str) -> int:
    if len(digits) > 18:
        _JsonFlags.odd = True
    return int(digits)


_DECODE = json.JSONDecoder(parse_constant=_parse_constant, parse_int=_parse_int).decode
_INT64 = (-(1 << 63), (1 << 63) - 1)


class _BadField(Exception):
    def __init__(self, field: str, reason: str, snippet: str) -> None:
        super().__init__(reason)
        self.field, self.reason, self.snippet = field, reason, snippet


def _clean(value: Any, field: str, notes: list[str]) -> Any:
    """A payload value any store can hold, deep: NaN/±Infinity -> None and integers outside
    int64 -> their decimal string (each noted in ``notes``); a lone surrogate (not UTF-8) raises
    :class:`_BadField`."""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            notes.append(f"payload field {field!r} is {value!r}: stored as null")
            return None
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if not _INT64[0] <= value <= _INT64[1]:
            notes.append(f"payload field {field!r} is an integer beyond 64 bits: stored as a string")
            return str(value)
        return value
    if isinstance(value, str):
        if _has_surrogates(value):
            raise _BadField(field, "invalid UTF-8 (lone surrogate) in field", _snippet(value))
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and _has_surrogates(k):
                raise _BadField(field, "invalid UTF-8 (lone surrogate) in a key", _snippet(k))
            out[k] = _clean(v, f"{field}.{k}", notes)
        return out
    if isinstance(value, list):
        return [_clean(v, field, notes) for v in value]
    return value


def clean_payload(payload: dict[str, Any], columns: list[str], notes: list[str]) -> dict[str, Any]:
    """Make ``payload[c]`` storable for each ``c`` in ``columns``: NaN/±Infinity -> None, integers
    beyond int64 -> strings, a value with a lone surrogate left out; each change is described in
    ``notes`` (the caller reports them as kept rejects)."""
    for col in columns:
        try:
            payload[col] = _clean(payload[col], col, notes)
        except _BadField as bad:
            notes.append(f"{bad.reason} {bad.field!r}: left out")
            payload.pop(col, None)
    return payload


def _iter_jsonl(spec: SourceSpec) -> Iterator[Document | Reject]:
    checker = _RowChecker(spec, None)
    row = -1
    columns_checked = False
    for lineno, line in _text_lines(Path(spec.path)):
        if not line.strip():
            continue  # blank lines separate nothing in JSONL; they are not rows
        row += 1
        if _has_surrogates(line):
            yield Reject(checker.source, row, lineno, None, "invalid UTF-8", _snippet(line))
            continue
        _JsonFlags.odd = False
        try:
            record = _DECODE(line)
        except json.JSONDecodeError as exc:
            yield Reject(checker.source, row, lineno, None, f"malformed JSON: {exc.msg}",
                         _snippet(line))
            continue
        except ValueError as exc:  # e.g. an integer with more digits than Python converts
            yield Reject(checker.source, row, lineno, None, f"malformed JSON: {exc}",
                         _snippet(line))
            continue
        except RecursionError:  # thousands of nested brackets: no store could hold it anyway
            yield Reject(checker.source, row, lineno, None, "JSON nests too deeply to parse",
                         _snippet(line))
            continue
        if not isinstance(record, dict):
            yield Reject(checker.source, row, lineno, None,
                         f"JSON line is a {type(record).__name__}, expected an object", _snippet(line))
            continue
        if not columns_checked:
            _first_record_columns(checker, record)
            columns_checked = True
        notes: list[str] = []
        if _JsonFlags.odd or "\\ud" in line or "\\uD" in line:
            try:
                record = _clean(record, "", notes)
            except _BadField as bad:
                yield Reject(checker.source, row, lineno, bad.field.lstrip(".") or None,
                             bad.reason, bad.snippet)
                continue
        yield _with_notes(checker.check(row, lineno, record), notes, checker.source)


def _with_notes(rec: Document | Reject, notes: list[str], source: str) -> Document | Reject:
    """Attach kept warnings (a payload value changed to be storable) to a document."""
    if notes and isinstance(rec, Document):
        rec.warnings += tuple(Reject(source, rec.row, rec.line, None, note, rec.text[:SNIPPET],
                                     kept=True) for note in notes)
    return rec


def _first_record_columns(checker: _RowChecker, record: dict[str, Any]) -> None:
    """On the first JSON object, fail fast when the text / id key is absent everywhere."""
    cols = list(record)
    if checker.spec.text_column not in record or (
        checker.spec.id_column is not None and checker.spec.id_column not in record
    ):
        checker._check_columns(cols)


def _header(path: Path, fields: list[str]) -> list[str]:
    """Column names of a delimited file: stripped, valid UTF-8 and unique, or a ConfigError."""
    header = [h.strip() for h in fields]
    bad = [h for h in header if _has_surrogates(h)]
    if bad:
        raise ConfigError(
            f"{path}: the header line is not valid UTF-8 (column {_snippet(bad[0])!r}). Save the "
            "file as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8) and try again.")
    refuse_duplicate_columns(path, header)
    return header


def refuse_duplicate_columns(path: Path | str, names: list[str]) -> None:
    """Raise :class:`ConfigError` naming the column names that occur more than once."""
    seen: set[str] = set()
    dups = sorted({n for n in names if n in seen or seen.add(n)})
    if dups:
        raise ConfigError(
            f"{path}: duplicate column name(s) {', '.join(map(repr, dups))} in the header; the "
            "values would overwrite each other. Rename the columns so each name is unique.")


class _Lines:
    """Decoded physical lines with push-back, counting the lines handed out."""

    def __init__(self, raw: Iterator[str]) -> None:
        self._raw = raw
        self._back: list[str] = []
        self.taken: list[str] = []  # lines handed out since the last reset
        self.lineno = 0  # physical lines handed out in total

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self._back.pop() if self._back else next(self._raw)
        self.taken.append(line)
        self.lineno += 1
        return line

    def push_back(self, lines: list[str]) -> None:
        self._back.extend(reversed(lines))
        self.lineno -= len(lines)


def _iter_delimited(spec: SourceSpec, delimiter: str) -> Iterator[Document | Reject]:
    """CSV (RFC 4180 quoting) or TSV (IANA: no quoting unless ``spec.quoting == 'csv'``).

    Every physical line is accounted for: a record that spans lines is either a quoted field with
    line breaks (kept, with a warning naming the lines) or an unterminated quote / a malformed
    record, whose first line is rejected and whose other lines are read again as records.
    """
    path = Path(spec.path)
    with _open_lines(path) as fh:
        if delimiter == "," or spec.quoting == "csv":
            yield from _iter_quoted(spec, delimiter, _Lines(fh))
        else:
            yield from _iter_tsv(spec, fh, str(spec.path))


def _iter_quoted(spec: SourceSpec, delimiter: str, lines: _Lines) -> Iterator[Document | Reject]:
    path = Path(spec.path)
    source = str(spec.path)
    reader = csv.reader(lines, delimiter=delimiter)
    try:
        header = _header(path, next(reader))
    except StopIteration:
        return
    except csv.Error as exc:
        raise ConfigError(f"{path}: the header line cannot be parsed as CSV: {exc}.") from exc
    checker = _RowChecker(spec, header)
    ncols = len(header)
    row = -1
    while True:
        lines.taken = []
        first = lines.lineno + 1
        try:
            fields = next(reader)
            error = None
        except StopIteration:
            return
        except csv.Error as exc:
            fields, error = None, str(exc)
        taken = lines.taken
        multi = len(taken) > 1
        if fields is not None and len(fields) < 2 and all(not t.strip() for t in taken):
            continue  # blank line(s): not a row
        row += 1
        if not multi and error is None and len(fields) == ncols:  # the common case, fast
            yield checker.check(row, first, dict(zip(header, fields)))
            continue
        last = first + len(taken) - 1
        if error is None and multi and "".join(taken).count('"') % 2:
            error = (f"unterminated quote: the quoted field opened on line {first} never closes "
                     f"(it would swallow lines {first}-{last})")
        elif error is None and len(taken) > 1 and len(fields) != ncols:
            error = (f"record spans lines {first}-{last} and has {len(fields)} field(s), header "
                     f"has {ncols}: probably a stray quote")
        elif (error is None and len(taken) > 1 and delimiter == "\t" and ncols > 1
              and any(t.count("\t") >= ncols - 1 for t in taken[1:])):
            # tabs almost never occur in text: a swallowed line with a full row of them is a row
            error = (f"a quote opened on line {first} swallowed lines {first + 1}-{last}, which "
                     "look like rows of their own")
        if error is not None:
            if "field larger than field limit" in error:
                error = (f"field longer than {csv.field_size_limit():,} characters (or an "
                         "unterminated quote swallowing the lines after it)")
            elif "new-line character seen in unquoted field" in error:
                error = "a lone carriage return (\\r) inside an unquoted field; quote the field"
            lines.push_back(taken[1:])  # read the swallowed lines again as records
            yield Reject(source, row, first, None, error, _snippet(taken[0]))
            continue
        if len(fields) != ncols:
            yield Reject(source, row, first, None,
                         f"ragged row: {len(fields)} field(s), header has {ncols}",
                         _snippet(delimiter.join(fields)))
            continue
        rec = checker.check(row, first, dict(zip(header, fields)))
        if len(taken) > 1 and isinstance(rec, Document):
            rec.warnings += (Reject(
                source, row, first, None,
                f"record spans lines {first}-{last} (a quoted field holds line breaks)",
                rec.text[:SNIPPET], kept=True),)
        yield rec


def _iter_tsv(spec: SourceSpec, fh: io.TextIOWrapper, source: str) -> Iterator[Document | Reject]:
    """IANA TSV: one record per line, fields split on tabs, quotes are ordinary characters."""
    try:
        first = next(fh)
    except StopIteration:
        return
    header = _header(Path(spec.path), first.rstrip("\r\n").split("\t"))
    checker = _RowChecker(spec, header)
    ncols = len(header)
    row = -1
    for lineno, line in enumerate(fh, start=2):
        if line.endswith("\n"):
            line = line[:-2] if line.endswith("\r\n") else line[:-1]
        if not line.strip():
            continue
        row += 1
        fields = line.split("\t")
        if len(fields) != ncols:
            yield Reject(source, row, lineno, None,
                         f"ragged row: {len(fields)} field(s), header has {ncols}",
                         _snippet(line))
            continue
        yield checker.check(row, lineno, dict(zip(header, fields)))


def _iter_parquet(spec: SourceSpec, batch_rows: int = 4096) -> Iterator[Document | Reject]:
    import pyarrow.parquet as pq

    from slimvec.sources.parquet_payload import payload_columns

    try:
        pf = pq.ParquetFile(spec.path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise ConfigError(f"{spec.path} is not a readable Parquet file: {exc}.") from exc
    names = list(pf.schema_arrow.names)
    refuse_duplicate_columns(spec.path, names)
    checker = _RowChecker(spec, names)
    row = -1
    for batch in pf.iter_batches(batch_size=batch_rows):
        batch, suspects = payload_columns(batch, spec.path, keep=(spec.text_column,))
        for record in batch.to_pylist():
            row += 1
            notes: list[str] = []
            if suspects:
                try:
                    for col in suspects:
                        record[col] = _clean(record[col], col, notes)
                except _BadField as bad:
                    yield Reject(checker.source, row, None, bad.field, bad.reason, bad.snippet)
                    continue
            yield _with_notes(checker.check(row, None, record), notes, checker.source)


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
    expected = 0
    for rec in iter_records(spec):
        if rec.row != expected:  # every record is exactly one Document or Reject, in order
            raise RuntimeError(f"{spec.path}: internal error: record {rec.row} follows "
                               f"{expected - 1}; rows would be lost. Please report this.")
        expected += 1
        if rec.row < start_row:
            continue
        if isinstance(rec, Document):
            docs.append(rec)
            if rec.warnings:
                rejects.extend(rec.warnings)
        else:
            rejects.append(rec)
        next_row = rec.row + 1
        if len(docs) + len(rejects) >= batch_size:
            yield docs, rejects, next_row
            docs, rejects = [], []
    if docs or rejects:
        yield docs, rejects, next_row


def json_payload(doc: Document) -> dict[str, Any]:
    """The document's payload fields whose values are JSON (others are left out, as in ingest)."""
    out = {}
    for key, value in doc.payload.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        out[key] = value
    return out


def _stored(doc: Document) -> dict[str, Any]:
    payload = json_payload(doc)
    payload["text"] = doc.text
    payload["source_id"] = doc.id
    return payload


def stored_payload(doc: Document) -> dict[str, Any]:
    """The payload a document is stored with: its JSON columns, ``text`` and ``source_id`` (what
    ``ingest --sync`` hashes to tell an unchanged document)."""
    return _stored(doc)
