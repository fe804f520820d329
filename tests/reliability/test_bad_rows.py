"""A corpus file per input format with every bad-row kind the format can hold, ingested for real.

tests/indexer/test_sources.py checks how each row is *parsed*; here the whole run is checked:
it completes, ``rejects.jsonl`` holds exactly the bad rows (source, line / row, field, reason,
snippet), the summary counts match, every good row is searchable by its exact text, a reused id
keeps the last text, and ``--strict`` stops at the first bad row naming the file and line.

Not every kind exists in every format: Parquet strings are valid UTF-8 by construction and has no
lines or ragged rows; blank lines in a text file separate documents and are not rows; only JSONL
has malformed lines; a text file's id is its text's hash, so it cannot reuse an id.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slimvec.errors import ConfigError
from slimvec.index.folder import open_index
from slimvec.indexer.pipeline import IngestOptions, ingest

N_GOOD = 20
LONG_TEXT = " ".join(["word"] * 300)  # beyond MiniLM's 256 tokens
DUP_TEXT = "A replacement sentence that reuses the id of an earlier row."

EMPTY = "empty or whitespace-only text"
BAD_UTF8 = "invalid UTF-8"
NUL = "NUL byte in text"


@dataclass
class Corpus:
    """A written corpus and what ingesting it must produce."""

    path: Path
    good: dict[str, str] = field(default_factory=dict)  # text -> source id expected in the index
    rejects: list[tuple[int | None, int, str | None, str]] = field(default_factory=list)
    kept: list[tuple[int | None, str]] = field(default_factory=list)  # (line, reason start)
    rows: int = 0
    lines: list[bytes] = field(default_factory=list)

    def add(self, raw: bytes, reject: tuple[str | None, str] | None = None) -> None:
        """Append one physical line (row); ``reject`` = (field, reason) it must be rejected with."""
        self.lines.append(raw)
        if reject:
            self.rejects.append((len(self.lines), self.rows, *reject))
        self.rows += 1


def _opts(**kw) -> IngestOptions:
    base = dict(reducer="rp:16", store="faiss", batch_size=8, progress=False)
    base.update(kw)
    return IngestOptions(**base)


def _jsonl(tmp: Path, sentences: list[str]) -> Corpus:
    c = Corpus(tmp / "docs.jsonl")
    add, lines = c.add, c.lines

    for i, s in enumerate(sentences[:N_GOOD]):
        add(json.dumps({"id": f"g{i}", "text": s}).encode())
        c.good[s] = f"g{i}"
    add(b'{"id": "e1", "text": ""}', ("text", EMPTY))
    add(b'{"id": "e2", "text": "  \\t  "}', ("text", EMPTY))
    add(b'{"id": "e3", "text": "bad \xff byte"}', (None, BAD_UTF8))
    add(b'{"id": "e4", "text": "nul \\u0000 inside"}', ("text", NUL))
    add(b'{"id": "e5", "text": "no closing brace"', (None, "malformed JSON"))
    add(json.dumps({"id": "g3", "text": DUP_TEXT}).encode())
    c.kept.append((len(lines), "duplicate id 'g3' with different text than row 3"))
    add(json.dumps({"id": "long", "text": LONG_TEXT}).encode())
    c.kept.append((len(lines), "text truncated to the model's maximum of 256 tokens"))
    del c.good[sentences[3]]
    c.good.update({DUP_TEXT: "g3", LONG_TEXT: "long"})
    c.path.write_bytes(b"\n".join(lines) + b"\n")
    return c


def _delimited(tmp: Path, sentences: list[str], delimiter: str, suffix: str) -> Corpus:
    c = Corpus(tmp / f"docs.{suffix}")
    lines: list[bytes] = [f"id{delimiter}text".encode()]

    def row(*fields: str) -> bytes:
        buf = io.StringIO()
        csv.writer(buf, delimiter=delimiter, lineterminator="").writerow(fields)
        return buf.getvalue().encode()

    def add(raw: bytes, reject: tuple[str | None, str] | None = None) -> None:
        lines.append(raw)
        if reject:
            c.rejects.append((len(lines), c.rows, *reject))
        c.rows += 1

    d = delimiter.encode()
    for i, s in enumerate(sentences[:N_GOOD]):
        add(row(f"g{i}", s))
        c.good[s] = f"g{i}"
    add(b"e1" + d, ("text", EMPTY))
    add(b"e2" + d + b"   ", ("text", EMPTY))
    add(b"e3" + d + b"bad \xff byte", ("text", BAD_UTF8))
    add(b"e4" + d + b"nul \x00 inside", ("text", NUL))
    add(b"e5" + d + b"one" + d + b"field too many", (None, "ragged row: 3 field(s), header has 2"))
    add(row("g3", DUP_TEXT))
    c.kept.append((len(lines), "duplicate id 'g3' with different text than row 3"))
    add(row("long", LONG_TEXT))
    c.kept.append((len(lines), "text truncated to the model's maximum of 256 tokens"))
    del c.good[sentences[3]]
    c.good.update({DUP_TEXT: "g3", LONG_TEXT: "long"})
    c.path.write_bytes(b"\n".join(lines) + b"\n")
    return c


def _text(tmp: Path, sentences: list[str]) -> Corpus:
    c = Corpus(tmp / "docs.txt")
    add, lines = c.add, c.lines

    for s in sentences[:N_GOOD]:
        add(s.encode())
        c.good[s] = None  # id: hash of the text
    lines.append(b"   \t ")  # a blank line: a separator, not a row
    add(b"bad \xff byte", ("text", BAD_UTF8))
    add(b"nul \x00 inside", ("text", NUL))
    add(LONG_TEXT.encode())
    c.kept.append((len(lines), "text truncated to the model's maximum of 256 tokens"))
    c.good[LONG_TEXT] = None
    c.path.write_bytes(b"\n".join(lines) + b"\n")
    return c


def _parquet(tmp: Path, sentences: list[str]) -> Corpus:
    c = Corpus(tmp / "docs.parquet")
    ids, texts = [], []

    def add(doc_id: str, text: str | None, reject: tuple[str | None, str] | None = None) -> None:
        ids.append(doc_id)
        texts.append(text)
        if reject:
            c.rejects.append((None, c.rows, *reject))
        c.rows += 1

    for i, s in enumerate(sentences[:N_GOOD]):
        add(f"g{i}", s)
        c.good[s] = f"g{i}"
    add("e1", "", ("text", EMPTY))
    add("e2", " \n ", ("text", EMPTY))
    add("e3", None, ("text", "missing text"))
    add("e4", "nul \x00 inside", ("text", NUL))
    add("g3", DUP_TEXT)
    c.kept.append((None, "duplicate id 'g3' with different text than row 3"))
    add("long", LONG_TEXT)
    c.kept.append((None, "text truncated to the model's maximum of 256 tokens"))
    del c.good[sentences[3]]
    c.good.update({DUP_TEXT: "g3", LONG_TEXT: "long"})
    pq.write_table(pa.table({"id": ids, "text": pa.array(texts, pa.string())}), c.path)
    return c


BUILDERS = {
    "jsonl": _jsonl,
    "csv": lambda tmp, s: _delimited(tmp, s, ",", "csv"),
    "tsv": lambda tmp, s: _delimited(tmp, s, "\t", "tsv"),
    "text": _text,
    "parquet": _parquet,
}


@pytest.mark.parametrize("fmt", list(BUILDERS))
def test_every_bad_row_kind_is_quarantined_and_good_rows_are_searchable(tmp_path, sentences, fmt):
    c = BUILDERS[fmt](tmp_path, sentences)
    index = tmp_path / "idx"
    summary = ingest(c.path, index, _opts())

    lines = (index / "rejects.jsonl").read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines]
    for e in entries:
        assert set(e) >= {"source", "row", "line", "field", "reason", "snippet", "kept"}
        assert e["source"] == str(c.path)
    dropped = sorted((e for e in entries if not e["kept"]), key=lambda e: e["row"])
    assert len(dropped) == len(c.rejects), dropped
    for e, (line, row, fld, reason) in zip(dropped, c.rejects):
        assert (e["line"], e["row"], e["field"]) == (line, row, fld), e
        assert e["reason"].startswith(reason), e
        assert e["snippet"] != "" or reason in (EMPTY, "missing text"), e
    kept = sorted((e for e in entries if e["kept"]), key=lambda e: e["row"])
    assert [(e["line"], e["reason"][:len(r)]) for e, (_, r) in zip(kept, c.kept)] == c.kept
    assert len(kept) == len(c.kept)

    assert summary.rejected == len(c.rejects) == sum(summary.reject_reasons.values())
    assert summary.truncated == 1
    assert summary.duplicates == (0 if fmt == "text" else 1)
    assert summary.rows == c.rows

    with open_index(index) as idx:
        assert idx.store.count() == len(c.good)
        short = [t for t in c.good if t != LONG_TEXT]
        # the long text alone: in one batch it would pad every short query to 256 tokens
        found = [(short, idx.search(short, k=3)), ([LONG_TEXT], idx.search([LONG_TEXT], k=3))]
        for texts, res in found:
            _assert_found(idx, texts, res, c.good)


def _assert_found(idx, texts: list[str], res, expected_ids: dict[str, str | None]) -> None:
    """Each text is among its own top hits, under the id it was ingested with."""
    for qi, text in enumerate(texts):
        hits = idx.payloads([int(i) for i in res.ids[qi] if i >= 0])
        match = [p for p in hits if p and p["text"] == text]
        assert match, f"{text[:40]!r} not found"
        if expected_ids[text] is not None:
            assert match[0]["source_id"] == expected_ids[text]  # the last text won the reused id


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_strict_stops_at_the_first_bad_row_naming_file_and_line(tmp_path, sentences, fmt):
    c = BUILDERS[fmt](tmp_path, sentences)
    line, row, _, _ = c.rejects[0]
    with pytest.raises(ConfigError) as err:
        ingest(c.path, tmp_path / "idx", _opts(strict=True))
    msg = str(err.value)
    assert msg.startswith(f"{c.path}: row {row} (line {line}): {EMPTY}"), msg
    assert "--strict" in msg


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_missing_text_column_is_fatal_before_any_row_naming_the_columns(tmp_path, fmt):
    path = tmp_path / f"docs.{fmt}"
    if fmt == "csv":
        path.write_text("doc_id,body\n1,first\n2,second\n", encoding="utf-8")
    else:
        pq.write_table(pa.table({"doc_id": [1, 2], "body": ["first", "second"]}), path)
    with pytest.raises(ConfigError, match=r"'text' not found.*'doc_id', 'body'.*--text-column"):
        ingest(path, tmp_path / "idx", _opts())
    assert not (tmp_path / "idx" / "manifest.json").exists()
    with pytest.raises(ConfigError, match=r"'id' not found.*'doc_id', 'body'"):
        ingest(path, tmp_path / "idx", _opts(text_column="body", id_column="id"))
