"""Ingest against the encoder's ceiling at a realistic size (issue 17 item 7).

The ceiling is the *best* encoder-only run of the same texts: one `Encoder.encode` call over the
whole list (sentence-transformers sorts the list by length, so batches pad little), at 32 and at
128 sentences per forward pass, the faster of the two. Each store's
`slimvec ingest` (sampling pass, fit-sample encoding, fit, streaming, index build, checksums; model
loading excluded) is measured right after a fresh ceiling run, in one process, and reported as a
ratio. The corpus is the unique sentences of the bundled pair files, written one per line.

Usage: python scripts/bench_ingest_ceiling.py [--docs 20000] [--stores qdrant-edge,hnsw,faiss]
       [--reducer pca:96] [--out FILE.md]
       (the store "default" runs plain `slimvec ingest`: the default recipe, --reducer ignored)
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

from slimvec.indexer.encoder import Encoder
from slimvec.indexer.pipeline import IngestOptions, ingest

DATA = Path(__file__).resolve().parents[1] / "slimvec" / "data"


def _sentences(n: int) -> list[str]:
    seen: dict[str, None] = {}
    for name in ("stsb-train.tsv", "sick-train.tsv", "msrp-train.tsv", "stsb-dev.tsv", "stsb-test.tsv"):
        with open(DATA / name, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
                for key in ("sentence1", "sentence2"):
                    text = " ".join((row.get(key) or "").split())
                    if text:
                        seen.setdefault(text, None)
    texts = list(seen)
    if len(texts) < n:
        raise SystemExit(f"only {len(texts):,} unique sentences bundled; ask for --docs {len(texts)} or fewer")
    return texts[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--stores", default="qdrant-edge,hnsw,faiss")
    ap.add_argument("--reducer", default="pca:96")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    texts = _sentences(args.docs)
    encoders = [Encoder("minilm", batch_size=b) for b in (32, 128)]
    for encoder in encoders:
        encoder.encode(texts[:64])  # warm-up
    rows = []
    with tempfile.TemporaryDirectory(prefix="slimvec-ceiling-") as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
        for store in args.stores.split(","):
            rates = []
            for encoder in encoders:
                t0 = time.perf_counter()
                encoder.encode(texts)
                rates.append(len(texts) / (time.perf_counter() - t0))
            ceiling = max(rates)
            print(f"{store}: encoder-only " + ", ".join(f"batch {e.batch_size}: {r:.0f} docs/s"
                                                      for e, r in zip(encoders, rates)), flush=True)
            # "default": plain `slimvec ingest` (the default recipe: full vectors kept as float16
            # and the rescoring depth calibrated at the end, both inside the measured time)
            opts = IngestOptions(progress=False) if store == "default" else IngestOptions(
                reducer=args.reducer, store=store, progress=False)
            summary = ingest(corpus, Path(tmp) / f"index-{store}", opts)
            rate = summary.ingested / summary.total_seconds
            rows.append((store, ceiling, rate, summary.encode_seconds, summary.total_seconds))
            print(f"{store}: ceiling {ceiling:.0f} docs/s, ingest {rate:.0f} docs/s, ratio {rate / ceiling:.2f}",
                  flush=True)
    lines = [f"Corpus: {len(texts):,} unique bundled sentences, one per line; all-MiniLM-L6-v2 on CPU; "
             f"reducer {args.reducer}; ceiling = the faster of one length-sorted `Encoder.encode` over all "
             "texts at 32 and at 128 sentences per pass, re-run before each store.", "",
             "| store | ceiling docs/s | ingest docs/s | ratio | ingest s | stream encoding s |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {s} | {c:,.0f} | {r:,.0f} | {r / c:.2f} | {t:.1f} | {e:.1f} |" for s, c, r, e, t in rows]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
