"""Ingest throughput, bytes on disk and search latency per store (the BENCHMARKS.md "Ingest" section).

Measures, in one run on this machine:
- encoder-only documents/s over the corpus (the ceiling: nothing ingests faster than it encodes);
- full ``slimvec ingest`` documents/s per store (streaming phase, same corpus, same batch size),
  with the ratio to encoder-only measured back to back;
- allocated bytes on disk per store at full dimension (``none``) and with ``pca:96``;
- p50 single-query latency per store (reduced queries, k=10, after warm-up).

Usage: python scripts/bench_ingest.py [--corpus slimvec/data/sentences.jsonl] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

import slimvec
from slimvec.indexer.encoder import Encoder
from slimvec.indexer.pipeline import IngestOptions, ingest

STORES = ["qdrant-edge", "qdrant", "faiss", "hnsw"]


def _texts(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def _latency(index: Path, queries: np.ndarray) -> float:
    with slimvec.open(index) as idx:
        reduced = idx.reducer.transform(queries)
        idx.store.search(reduced[:20], 10)
        times = []
        for q in reduced:
            t0 = time.perf_counter()
            idx.store.search(q[None, :], 10)
            times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("slimvec/data/sentences.jsonl"))
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    texts = _texts(args.corpus)
    enc = Encoder(batch_size=128)
    enc.encode(texts[:256])  # warm-up
    rows = []
    queries = enc.encode(texts[:200])
    with tempfile.TemporaryDirectory() as tmp:
        for store in STORES:
            t0 = time.perf_counter()
            for i in range(0, len(texts), args.batch_size):
                enc.encode(texts[i:i + args.batch_size])
            enc_dps = len(texts) / (time.perf_counter() - t0)
            sizes = {}
            for reducer in ("none", "pca:96"):
                index = Path(tmp) / f"{store}-{reducer.replace(':', '')}"
                s = ingest(args.corpus, index, IngestOptions(reducer=reducer, store=store,
                           batch_size=args.batch_size, progress=False))
                with slimvec.open(index) as idx:
                    sizes[reducer] = idx.store.size_bytes()
                if reducer == "pca:96":
                    # whole wall time: sampling pass, fit-sample encoding, fit, streaming, HNSW build
                    ingest_dps = s.ingested / s.total_seconds
                    lat = _latency(index, queries)
            rows.append((store, enc_dps, ingest_dps, ingest_dps / enc_dps, sizes["none"], sizes["pca:96"], lat))
    lines = [
        f"Corpus: {args.corpus} ({len(texts):,} documents), encoder all-MiniLM-L6-v2 (384-d) on CPU, "
        f"batch {args.batch_size}. Encoder-only is re-measured right before each store's ingest.",
        "",
        "| store | encoder-only docs/s | ingest docs/s (pca:96) | ratio | bytes on disk, 384-d (none) | bytes on disk, 96-d (pca:96) | bytes/vector 384-d | bytes/vector 96-d | p50 search ms (96-d) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    n = len(texts)
    for store, e, i, r, b_full, b_red, lat in rows:
        lines.append(f"| {store} | {e:,.0f} | {i:,.0f} | {r:.2f} | {b_full:,} | {b_red:,} | "
                     f"{b_full / n:,.0f} | {b_red / n:,.0f} | {lat:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
