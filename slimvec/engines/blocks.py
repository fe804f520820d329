"""Input files -> deterministic blocks of rows, parsed by :mod:`slimvec.sources.readers`.

A block is rows ``[k·B, (k+1)·B)`` of one input file (``B`` the batch size), so its identity
``(file, k)`` does not depend on which worker read it, in which order, or how often it was retried:
the writer records committed blocks in the manifest and a rerun skips them.

Why not Ray's own ``read_json`` / ``read_csv`` / ``read_parquet``: they parse with pyarrow, which
fails a whole block on one malformed JSON line or ragged CSV row, infers column types (an id
column of digits becomes integers, changing the document ids) and knows nothing of slimvec's
per-row rejects. Each file is therefore read inside a Ray Data task with the same source code as
the single-process ingest, so bad rows are rejected with the same reasons, rows and lines.
"""

from __future__ import annotations

import glob
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError
from slimvec.sources.readers import Document, Reject, SourceSpec, detect_format, iter_records, json_payload

__all__ = ["InputFile", "expand_inputs", "iter_blocks", "sample_documents", "doc_to_json",
           "doc_from_json", "reject_from_json"]


@dataclass(frozen=True)
class InputFile:
    """One input file of a distributed ingest: its index in the run and its source spec."""

    index: int
    spec: SourceSpec


def _readable(path: Path, fmt: str | None) -> bool:
    try:
        detect_format(path, fmt)
    except ConfigError:
        return False
    return True


def expand_inputs(pattern: str, text_column: str = "text", id_column: str | None = None,
                  fmt: str | None = None) -> list[InputFile]:
    """A file, a folder (its files with a known suffix, recursively) or a glob -> sorted files.

    Raises
    ------
    ConfigError
        Nothing matches, or a file named explicitly has an unknown format.
    """
    path = Path(pattern)
    if path.is_file():
        detect_format(path, fmt)  # an explicit file of unknown format is an error, not skipped
        files = [path]
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")
                       and _readable(p, fmt))
    else:
        files = sorted(Path(p) for p in glob.glob(pattern, recursive=True)
                       if Path(p).is_file() and _readable(Path(p), fmt))
    if not files:
        raise ConfigError(f"Input {pattern!r} matches no JSONL, CSV, TSV, Parquet or text file. Pass "
                          "a file, a folder or a quoted glob such as 'data/*.jsonl'.")
    return [InputFile(i, SourceSpec(str(f.resolve()), text_column, id_column, fmt))
            for i, f in enumerate(files)]



def doc_to_json(doc: Document) -> list[Any]:
    """A document as a JSON-ready list (payload values that are not JSON are dropped, as in ingest)."""
    return [doc.id, doc.text, json_payload(doc), doc.row, doc.line]


def doc_from_json(item: Sequence[Any]) -> Document:
    """Inverse of :func:`doc_to_json`."""
    return Document(item[0], item[1], dict(item[2]), int(item[3]), item[4])


def reject_from_json(item: dict[str, Any]) -> Reject:
    """A :class:`Reject` from its ``to_json`` dict."""
    return Reject(item["source"], int(item["row"]), item["line"], item["field"], item["reason"],
                  item.get("snippet", ""), bool(item.get("kept", False)))


def iter_blocks(spec: SourceSpec, batch_size: int, skip: set[int] | frozenset[int] = frozenset()
                ) -> Iterator[tuple[int, list[Document], list[Reject], int]]:
    """Yield ``(block, documents, rejects, rows)`` for every block of the file not in ``skip``.

    Block ``k`` holds data rows ``[k·batch_size, (k+1)·batch_size)``; ``rows`` counts them.
    """
    current, docs, rejects = -1, [], []
    for rec in iter_records(spec):
        block = rec.row // batch_size
        if block != current:
            if current >= 0 and current not in skip:
                yield current, docs, rejects, len(docs) + len(rejects)
            current, docs, rejects = block, [], []
        if block in skip:
            continue
        (docs if isinstance(rec, Document) else rejects).append(rec)
    if current >= 0 and current not in skip:
        yield current, docs, rejects, len(docs) + len(rejects)


def sample_documents(files: Sequence[InputFile], n: int, seed: int = 0
                     ) -> tuple[list[tuple[int, Document]], int]:
    """Uniform reservoir sample of up to ``n`` documents over all files (Algorithm R).

    The same draw as the single-process ingest's sample for one file and the same seed, so both
    engines fit the same reducer. Returns ``(file index, document)`` sorted by file and row, and
    the number of rows read.
    """
    rng = random.Random(seed)
    sample: list[tuple[int, Document]] = []
    seen = rows = 0
    for f in files:
        for rec in iter_records(f.spec):
            rows += 1
            if not isinstance(rec, Document):
                continue
            seen += 1
            if len(sample) < n:
                sample.append((f.index, rec))
            else:
                j = rng.randrange(seen)
                if j < n:
                    sample[j] = (f.index, rec)
    sample.sort(key=lambda fd: (fd[0], fd[1].row))
    return sample, rows
