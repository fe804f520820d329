"""Write the scale-run vectors of issue 17 into bench-data/ (git-ignored).

Synthetic: a Gaussian mixture fitted to all-MiniLM-L6-v2 vectors of the bundled sentences
(benchmarks.corpora.synthetic), 1,000,000 corpus vectors (seed 0) with the 100k and 300k prefixes,
and 1,000 held-out queries (seed 1). Real: GloVe 6B-50d (400k words, cosine): 1,000 rows drawn
at random (seed 0) become the queries and are left out of the corpus (399,000 rows).

    python scripts/make_scale_data.py            # everything (1M: ~1.5 GB on disk, a few minutes)
    python scripts/make_scale_data.py --max 100000   # only the 100k corpus (smoke runs)
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's benchmarks/ tree (not installed)

from benchmarks.corpora import synthetic as syn  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-data")
    ap.add_argument("--max", type=int, default=1_000_000, help="largest synthetic corpus to write")
    ap.add_argument("--k", type=int, default=64, help="mixture components")
    ap.add_argument("--no-glove", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    mix_dir = out / f"minilm-mixture-k{args.k}"
    if (mix_dir / "config.json").exists():
        mix = syn.Mixture.load(mix_dir)
    else:
        real = syn.minilm_bundled_vectors()
        mix = syn.fit_mixture(real, k=args.k, seed=0,
                              source=f"all-MiniLM-L6-v2 vectors of {len(real)} bundled sentences")
        mix.save(mix_dir)
    syn.write_vectors(out / "minilm-mixture-queries.npy", mix, 1000, seed=1)
    sizes = [n for n in (100_000, 300_000, 1_000_000) if n <= args.max]
    big = syn.write_vectors(out / f"minilm-mixture-{sizes[-1] // 1000}k.npy", mix, sizes[-1], seed=0)
    for n in sizes[:-1]:
        syn.prefix(big, n, out / f"minilm-mixture-{n // 1000}k.npy")
    if not args.no_glove:
        vectors, _ = syn.load_glove_50d(mmap=False)
        rng = np.random.default_rng(0)
        q = np.sort(rng.choice(len(vectors), 1000, replace=False))
        keep = np.ones(len(vectors), dtype=bool)
        keep[q] = False
        np.save(out / "glove-50d-queries.npy", vectors[q], allow_pickle=False)
        np.save(out / "glove-50d-corpus.npy", vectors[keep], allow_pickle=False)


if __name__ == "__main__":
    main()
