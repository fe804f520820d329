"""Encode the real-text corpus once, resumably, into the vector files the scale suites read.

The corpus folder (:mod:`benchmarks.corpora.realtext`) holds text only. This step encodes it
through :class:`~slimvec.benchmarks.encoding_cache.EncodingCache` (keyed by each text's hash, so an
interrupted run resumes where it stopped) and writes, into ``--data`` (default ``bench-data/``,
git-ignored):

- ``realtext-<model>-queries.npy``: the held-out queries, in ``queries.jsonl`` order;
- ``realtext-<model>-<size>.npy`` for each requested size: the first ``size`` rows of one seeded
  permutation of the corpus, so every size is a uniform sample and a smaller one is a prefix of a
  larger one (as the synthetic 100k/300k/1M files are);
- ``realtext-<model>.json``: the permutation's seed, the sizes, the corpus manifest's SHA-256s, the
  encoder fingerprint and the seconds spent.

Queries are encoded first, then the permutation in order, and each size's file is written as soon
as its prefix is encoded, so the 100k suite can start long before 300k is done.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpora.realtext import read_jsonl
from slimvec.benchmarks.encoding_cache import EncodingCache, default_cache_dir
from slimvec.errors import ConfigError

__all__ = ["encode_corpus", "size_label"]

log = logging.getLogger(__name__)


def size_label(n: int) -> str:
    """``100000`` → ``"100k"``; a size that is not a whole thousand keeps its digits."""
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def _save(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.save(fh, np.ascontiguousarray(array, dtype=np.float32), allow_pickle=False)
    os.replace(tmp, path)


def encode_corpus(corpus_dir: Path, data_dir: Path, *, sizes: tuple[int, ...] = (100_000, 300_000),
                  model: str = "minilm", seed: int = 0, chunk: int = 4096,
                  cache_dir: Path | None = None) -> dict[str, Any]:
    """Encode queries and a seeded permutation of the corpus; write one ``.npy`` per size.

    Parameters
    ----------
    corpus_dir : Path
        Folder written by :func:`benchmarks.corpora.realtext.build_corpus`.
    data_dir : Path
        Where the ``.npy`` files go.
    sizes : tuple of int
        Corpus prefixes to write; a size above the corpus is refused. The whole corpus is written
        too, labelled ``all``.
    model : str
        Encoder name or path (:class:`slimvec.encoder.Encoder`).
    seed : int
        Seed of the permutation.
    chunk : int
        Texts per encoding step (and cache shard).
    cache_dir : Path, optional
        Encoding cache root [default: :func:`default_cache_dir`].

    Returns
    -------
    dict
        The record also written to ``realtext-<model>.json``.
    """
    from slimvec.encoder import Encoder, default_encoder_threads, encoder_threads

    manifest_path = corpus_dir / "manifest.json"
    if not manifest_path.is_file():
        raise ConfigError(f"No corpus in {corpus_dir}: {manifest_path.name} is missing. Build it "
                          "first: python scripts/make_real_corpus.py")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    texts = [row["text"] for row in read_jsonl(corpus_dir / "corpus.jsonl")]
    queries = [row["text"] for row in read_jsonl(corpus_dir / "queries.jsonl")]
    too_big = [n for n in sizes if n > len(texts)]
    if too_big:
        raise ConfigError(f"--sizes {too_big} exceed the corpus ({len(texts):,} sentences); pass "
                          "smaller sizes")
    started = time.perf_counter()
    encoder = Encoder(model)
    cache = EncodingCache(cache_dir or default_cache_dir(), encoder.fingerprint)
    data_dir.mkdir(parents=True, exist_ok=True)
    stem = f"realtext-{Path(model).name}"
    _save(data_dir / f"{stem}-queries.npy", cache.encode(encoder, queries, chunk=chunk))
    order = np.random.default_rng(seed).permutation(len(texts))
    done: list[np.ndarray] = []
    written: dict[str, int] = {}
    marks = sorted(set(sizes) | {len(texts)})
    for start in range(0, len(texts), chunk):
        part = [texts[i] for i in order[start:start + chunk]]
        with encoder_threads(default_encoder_threads()):  # the cores left free: see its docstring
            done.append(cache.encode(encoder, part, chunk=chunk))
        n = start + len(part)
        log.info("encoded %d of %d corpus sentences (%.0f s)", n, len(texts),
                 time.perf_counter() - started)
        for mark in [m for m in marks if start < m <= n]:
            label = "all" if mark == len(texts) else size_label(mark)
            _save(data_dir / f"{stem}-{label}.npy", np.concatenate(done)[:mark])
            written[label] = mark
    record: dict[str, Any] = {
        "format": "slimvec-realtext-vectors/1", "model": model,
        "encoder_fingerprint": encoder.fingerprint, "seed": seed, "sizes": written,
        "queries": len(queries), "corpus_sha256": manifest["corpus"]["sha256"],
        "queries_sha256": manifest["queries"]["sha256"],
        "seconds": round(time.perf_counter() - started, 1),
    }
    (data_dir / f"{stem}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record
