"""Print single-query search latency of an index, end to end and labelled (issue 27 item 8).

Two figures, both through ``Index.search`` (the reducer, the store and, when the index rescores
by default, the re-ranking from the full vectors): from query *texts* (encoding included) and
from pre-encoded query *vectors* (encoding excluded). The store's own search on reduced vectors,
which this script used to time alone ("search p50 0.04 ms"), is not a search a user can run.
Model loading and a warm-up happen before timing.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import slimvec


def _percentiles(times: list[float]) -> str:
    p50, p99 = np.percentile(times, [50, 99])
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"


def main(folder: str, n: int = 200) -> None:
    with slimvec.open(folder) as idx:
        texts = ["A man is playing a guitar.", "Two dogs run on the beach.", "The stock market fell."]
        queries = (texts * (n // len(texts) + 1))[:n]
        full = idx.embed(queries)  # loads the model
        idx.search(full[:10], 10)  # warm-up
        by_text, by_vector = [], []
        for text, vec in zip(queries, full):
            t0 = time.perf_counter()
            idx.search([text], 10)
            by_text.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            idx.search(vec[None, :], 10)
            by_vector.append((time.perf_counter() - t0) * 1000)
        info = idx.info()
    depth = info.get("rescore") or "no re-ranking"
    print(f"{info['count']:,} vectors, recipe {info.get('recipe') or info['reducer'] + '|' + info['store']}: "
          f"{info['dim_out']} dims stored (from {info['dim_in']}), store {info['store_bytes']:,} bytes "
          f"on disk, reducer {info['reducer_bytes']:,} bytes")
    print(f"Index.search, k=10, rescoring {depth}, over {n} single queries:")
    print(f"  end to end from text (encode + reduce + store + re-rank): {_percentiles(by_text)}")
    print(f"  from encoded vectors (reduce + store + re-rank):          {_percentiles(by_vector)}")


if __name__ == "__main__":
    main(sys.argv[1])
