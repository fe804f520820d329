"""Print p50/p99 single-query search latency of an index (reduced query vectors, warm)."""

from __future__ import annotations

import sys
import time

import numpy as np

import slimvec


def main(folder: str, n: int = 200) -> None:
    with slimvec.open(folder) as idx:
        texts = ["A man is playing a guitar.", "Two dogs run on the beach.", "The stock market fell."]
        full = idx.embed(texts * (n // len(texts) + 1))[:n]
        reduced = idx.reducer.transform(full)
        idx.store.search(reduced[:10], 10)  # warm-up
        times = []
        for q in reduced:
            t0 = time.perf_counter()
            idx.store.search(q[None, :], 10)
            times.append((time.perf_counter() - t0) * 1000)
        info = idx.info()
    p50, p99 = np.percentile(times, [50, 99])
    print(f"{info['count']:,} vectors of {info['dim_out']} dims (from {info['dim_in']}): "
          f"store {info['store_bytes']:,} bytes on disk, reducer {info['reducer_bytes']:,} bytes; "
          f"search p50 {p50:.2f} ms, p99 {p99:.2f} ms over {n} single queries")


if __name__ == "__main__":
    main(sys.argv[1])
