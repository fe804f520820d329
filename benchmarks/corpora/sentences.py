"""Texts and vector files the measurements read: the bundled sentences, and the two vector corpora
the fair-peers and filtered suites read (``python -m benchmarks vectors KIND NPY``)."""

from __future__ import annotations

import csv
import glob
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from slimvec.errors import ConfigError

__all__ = ["DATA", "PAIR_FILES", "pair_sentences", "jsonl_rows", "write_jsonl", "fair_peers_vectors",
           "filtered_vectors", "VECTOR_KINDS", "suite_cache_dir"]

log = logging.getLogger(__name__)

DATA = Path(__file__).resolve().parents[2] / "slimvec" / "data"  # the bundled data
#: the bundled pair files, in the order their sentences are taken
PAIR_FILES = ("stsb-train.tsv", "sick-train.tsv", "msrp-train.tsv", "stsb-dev.tsv", "stsb-test.tsv")


def pair_sentences(n: int | None = None, files: Sequence[str] = PAIR_FILES,
                   extra_jsonl: Path | None = None, collapse: bool = True) -> list[str]:
    """Unique sentences (whitespace collapsed) of the bundled pair files, in file order.

    Parameters
    ----------
    n : int, optional
        How many; more than are bundled is a :class:`ConfigError` naming how many there are.
    files : sequence of str
        Pair files under ``slimvec/data`` (``sentence1<TAB>sentence2<TAB>score``).
    extra_jsonl : Path, optional
        A JSONL file whose ``text`` fields follow the pairs' sentences.
    collapse : bool
        Collapse whitespace runs (False: the texts exactly as in the file, as the test suite's
        encoding cache holds them).
    """
    seen: dict[str, None] = {}
    for name in files:
        with open(DATA / name, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
                for key in ("sentence1", "sentence2"):
                    text = row.get(key) or ""
                    text = " ".join(text.split()) if collapse else text
                    if text:
                        seen.setdefault(text, None)
        if n is not None and len(seen) >= n and extra_jsonl is None:
            break
    if extra_jsonl is not None:
        for row in jsonl_rows(extra_jsonl):
            seen.setdefault(" ".join(str(row.get("text", "")).split()), None)
    texts = [t for t in seen if t]
    if n is not None and len(texts) < n:
        raise ConfigError(f"Only {len(texts):,} unique bundled sentences, {n:,} asked: pass "
                          f"{len(texts):,} or fewer.")
    return texts if n is None else texts[:n]


def jsonl_rows(path: Path, limit: int | None = None) -> list[dict]:
    """The first ``limit`` JSON objects of a JSONL file (all when None)."""
    out: list[dict] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    out.append(json.loads(line))
                    if limit is not None and len(out) == limit:
                        break
    except FileNotFoundError as exc:
        raise ConfigError(f"No file {path}: expected a JSONL corpus (one {{\"id\", \"text\"}} object "
                          "a line), e.g. from `python scripts/make_real_corpus.py`.") from exc
    return out


def write_jsonl(path: Path, rows: Sequence[dict]) -> Path:
    """Write ``rows`` one JSON object a line; returns ``path``."""
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def suite_cache_dir() -> Path:
    """The test suite's encoding cache ($SLIMVEC_TEST_CACHE/encodings or ~/.cache/slimvec-tests/encodings)."""
    return Path(os.environ.get("SLIMVEC_TEST_CACHE", Path.home() / ".cache" / "slimvec-tests")) / "encodings"


#: fair-peers corpus: (pair file, how many of its unique sentences; None = all)
FAIR_PEERS_SOURCES = (("stsb-dev.tsv", None), ("stsb-test.tsv", 1095), ("stsb-train.tsv", 5300))


def _file_sentences(name: str, limit: int | None) -> list[str]:
    seen: dict[str, None] = {}
    with open(DATA / name, encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            for text in line.rstrip("\n").split("\t")[:2]:
                seen.setdefault(text)
    return list(seen)[:limit]


def fair_peers_vectors(out: Path) -> int:
    """Write the MiniLM vectors the fair-peers suites read (``bench-data/fair-peers-minilm.npy``).

    The unique sentences of STS-B dev, then the first 1,095 of STS-B test and the first 5,300 of
    STS-B train, encoded through the test suite's and the bench's encoding caches (only the
    missing ones are encoded). Returns the number of vectors.
    """
    from slimvec.benchmarks.encoding_cache import EncodingCache, default_cache_dir
    from slimvec.encoder import Encoder

    texts = list(dict.fromkeys(t for name, limit in FAIR_PEERS_SOURCES for t in _file_sentences(name, limit)))
    encoder = Encoder()
    vecs, missing = EncodingCache(suite_cache_dir(), encoder.fingerprint).get(texts)
    bench_cache = EncodingCache(default_cache_dir(), encoder.fingerprint)
    if vecs is None or missing:
        found = bench_cache.encode(encoder, [texts[i] for i in missing] if vecs is not None else texts)
        if vecs is None:
            vecs = found
        else:
            vecs[missing] = found
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, np.ascontiguousarray(vecs, dtype=np.float32), allow_pickle=False)
    return len(texts)


def filtered_vectors(out: Path, n: int = 8000, caches: Sequence[Path] | None = None) -> int:
    """Write the filtered suite's corpus: the first ``n`` unique cached MiniLM encodings.

    Reads the shards of the bench's and the test suite's encoding caches (nothing is encoded),
    drops exact duplicate vectors and keeps the first ``n``, so every selectivity matches an exact
    share. Returns the number of vectors written.
    """
    from slimvec.benchmarks.encoding_cache import default_cache_dir

    seen: set[bytes] = set()
    vecs = []
    for cache in caches or (default_cache_dir(), suite_cache_dir()):
        for keys_path in sorted(glob.glob(str(Path(cache) / "*" / "shard-*.keys.npy"))):
            keys = np.load(keys_path, allow_pickle=False)
            values = np.load(keys_path.replace(".keys.npy", ".vecs.npy"), allow_pickle=False)
            for key, vec in zip(keys, values):
                if bytes(key) not in seen:
                    seen.add(bytes(key))
                    vecs.append(vec)
    if not vecs:
        raise ConfigError("No cached MiniLM encodings found to assemble the filtered corpus from: "
                          "run the test suite or a `slimvec bench --pairs` run first.")
    V = np.stack(vecs).astype(np.float32)
    _, first = np.unique(np.round(V, 5), axis=0, return_index=True)
    V = V[np.sort(first)][:n]
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, V, allow_pickle=False)
    return int(V.shape[0])


#: ``python -m benchmarks vectors KIND NPY``
VECTOR_KINDS: dict[str, Callable[[Path], int]] = {"fair-peers": fair_peers_vectors,
                                                  "filtered": filtered_vectors}
