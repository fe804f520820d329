"""What ``slimvec plan --corpus FILE`` measures on the user's own documents (issue 52).

The first rows of the file are read the way ``slimvec ingest`` reads them
(:func:`slimvec.sources.readers.iter_records`), so the payload of each is what ingest stores
(its JSON columns, ``text`` and ``source_id``: :func:`~slimvec.sources.readers.stored_payload`).
From them: the mean stored payload bytes (``--payload-bytes``) and the constants of the declared
payload indexes measured on those payloads (:func:`slimvec.planner.payload_sizing.fit_on_payloads`).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError

__all__ = ["CorpusProfile", "read_corpus", "profile_corpus", "ingest_rate"]


@dataclass
class CorpusProfile:
    """Measured on ``rows`` documents of ``path``."""

    path: str
    rows: int
    payload_bytes: int
    payload_index: dict[str, float] = field(default_factory=dict)
    mean_words: float = 0.0
    #: MiniLM tokens per text (its tokenizer, before truncation) and the CPU encoder's
    #: docs/s on one thread measured on ``rate_texts`` of these texts (None: not measured)
    mean_tokens: float | None = None
    cpu_rate: float | None = None
    rate_texts: int = 0

    def rate_assumes(self) -> str:
        """The text length the measured rate holds for, in words."""
        tokens = "" if self.mean_tokens is None else f", {self.mean_tokens:.0f} tokens"
        return f"{self.rate_texts:,} texts of {self.path} (mean {self.mean_words:.0f} words{tokens})"

    def to_json(self) -> dict[str, Any]:
        """JSON form (``plan --json``'s ``corpus``)."""
        return {"path": self.path, "rows": self.rows, "payload_bytes": self.payload_bytes,
                "payload_index_constants": self.payload_index or None,
                "mean_words": round(self.mean_words, 1),
                "mean_tokens": None if self.mean_tokens is None else round(self.mean_tokens, 1),
                "cpu_docs_per_s_per_core": self.cpu_rate, "rate_texts": self.rate_texts}


def read_corpus(path: str | Path, rows: int = 2000, text_column: str = "text",
                id_column: str | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """The texts and stored payloads of the first ``rows`` documents of ``path`` (rejected rows
    skipped, as ingest skips them).

    Raises
    ------
    ConfigError
        The file holds no document ingest would take.
    """
    from slimvec.documents import Document
    from slimvec.sources.readers import SourceSpec, iter_records, stored_payload

    texts: list[str] = []
    payloads: list[dict[str, Any]] = []
    for rec in iter_records(SourceSpec(str(path), text_column=text_column, id_column=id_column)):
        if isinstance(rec, Document):
            texts.append(rec.text)
            payloads.append(stored_payload(rec))
            if len(texts) >= rows:
                break
    if not texts:
        raise ConfigError(f"--corpus {path}: no document ingest would take in it (expected rows "
                          f"with a {text_column!r} column).")
    return texts, payloads


def profile_corpus(path: str | Path, rows: int = 2000, payload_index: dict[str, str] | None = None,
                   text_column: str = "text", workdir: str | Path | None = None,
                   rate_texts: int = 0) -> CorpusProfile:
    """Payload bytes, payload index constants and text lengths measured on ``path``'s rows; with
    ``rate_texts``, MiniLM's tokens per text and CPU docs/s (:func:`ingest_rate`) on that many of
    them, taken evenly over the rows read."""
    from slimvec.planner.payload_sizing import fit_on_payloads

    texts, payloads = read_corpus(path, rows, text_column)
    sizes = [len(json.dumps(p, ensure_ascii=False, allow_nan=False).encode("utf-8")) for p in payloads]
    constants = fit_on_payloads(payload_index, payloads, workdir=workdir) if payload_index else {}
    # spread over the rows read: a file's first texts need not be as long as the rest (STS-B's
    # first 2,000 training sentences average 7.3 words, its first 10,000 10.3)
    sample = texts[::max(1, len(texts) // rate_texts)][:rate_texts] if rate_texts else []
    prof = CorpusProfile(str(path), len(texts), round(sum(sizes) / len(sizes)), constants,
                         sum(len(t.split()) for t in (sample or texts)) / len(sample or texts))
    if sample:
        from slimvec.encoder import Encoder

        prof.mean_tokens = sum(Encoder().count_tokens(sample)) / len(sample)
        with tempfile.TemporaryDirectory(prefix="slimvec-rate-", dir=workdir) as tmp:
            prof.cpu_rate, prof.rate_texts = ingest_rate(sample, tmp), len(sample)
    return prof


def ingest_rate(texts: list[str], workdir: str | Path) -> float:
    """Documents per CPU-second of the encoder in a real ``slimvec ingest --threads 1`` of
    ``texts`` into a fresh index of the default recipe under ``workdir``: the encoder as an
    ingest runs it (length-sorted windows, passes of the ingest's batch, beside the reader and
    the writer), counted on its thread's CPU clock so that a loaded machine does not lower it
    (:attr:`~slimvec.indexer.writer.IngestSummary.encode_cpu_seconds`)."""
    from slimvec.indexer.pipeline import IngestOptions, ingest

    src = Path(workdir) / "texts.jsonl"
    src.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    summary = ingest(src, Path(workdir) / "index", IngestOptions(threads=1))
    return summary.ingested / max(summary.encode_cpu_seconds, 1e-9)
