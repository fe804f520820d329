"""Calibrated rescoring depth (rescore=auto, target 0.99) of pca:96 | hnsw on prefixes of the
SYNTHETIC MiniLM-mixture corpus (slimvec.benchmarks.synthetic), to see the depth grow with N.

    python scripts/make_scale_data.py --max 100000     # bench-data/minilm-mixture-100k.npy
    OMP_NUM_THREADS=1 python scripts/calibrate_growth.py 10000 30000 100000

PCA is fitted on the first 20,000 rows; 300 sample ids outside them are the queries (at N <=
20,000 every row was in the fit sample, so the sample is drawn from all rows).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from slimvec.connectors import make_store
from slimvec.connectors.fullvectors import FullVectors
from slimvec.indexer.calibrate import calibrate_rescore, pick_sample
from slimvec.reducers import make_reducer

DATA = Path(__file__).resolve().parents[1] / "bench-data" / "minilm-mixture-100k.npy"


def main(sizes: list[int]) -> None:
    X = np.load(DATA, mmap_mode="r", allow_pickle=False)
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.time()
            V = np.asarray(X[:n])
            ids = np.arange(1, n + 1)
            reducer = make_reducer("pca:96").fit(V[:20000])
            store = make_store("hnsw", Path(tmp) / "store").create(96)
            for lo in range(0, n, 4096):
                store.upsert(ids[lo:lo + 4096], reducer.transform(V[lo:lo + 4096]))
            store.finalize()
            store.flush()
            full = FullVectors.create(Path(tmp) / "full", V.shape[1])
            full.append(ids, V)
            full.commit()
            t1 = time.time()
            sample = pick_sample(ids, 300, exclude=ids[:20000], seed=0)
            cal = calibrate_rescore(store, reducer, full, sample, target=0.99, max_depth=64)
            ladder = {r: round(v, 4) for r, v in cal.ladder.items()}
            print(f"n={n} depth={cal.depth} recall={cal.recall:.4f} reached={cal.reached} ladder={ladder} "
                  f"build_s={t1 - t0:.0f} calibrate_s={time.time() - t1:.1f}", flush=True)
            store.close()
            full.close()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10000, 30000, 100000])
