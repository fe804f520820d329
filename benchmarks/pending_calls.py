"""Time the Qdrant-API calls of a served collection below its fit threshold in process (no HTTP):
where the time of ``query_points``, ``count``, ``get_collection`` and ``upsert`` goes.

    python benchmarks/pending_calls.py [--n 500] [--dim 384] [--calls 20] [--profile query]

Prints one JSON line of median milliseconds per call; ``--profile CALL`` also prints cProfile's
top functions of that call. Over HTTP: ``python -m benchmarks qdrant-compat --n 500``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from slimvec.service.config import ServiceConfig
from slimvec.service.qdrant_api.translate import Collections
from slimvec.service.state import ServiceState


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--profile", choices=["query", "count", "get_collection", "upsert"])
    args = ap.parse_args()
    X = np.random.default_rng(0).standard_normal((args.n + 50, args.dim)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        st = ServiceState(ServiceConfig(root=root))
        st.startup()
        cols = Collections(st)
        cols.create("c", {"vectors": {"size": args.dim, "distance": "Cosine"}})

        def upsert(lo: int, hi: int) -> None:
            cols.upsert("c", {"points": [{"id": i, "vector": X[i].tolist(), "payload": {"g": i % 5}}
                                         for i in range(lo, hi)]}, True)

        for lo in range(0, args.n, 50):
            upsert(lo, min(args.n, lo + 50))
        extra = iter(range(args.n, args.n + 50))

        def upsert_one() -> None:
            i = next(extra)
            upsert(i, i + 1)

        calls = {"query": lambda: cols.query("c", {"query": X[1].tolist(), "limit": 10,
                                                   "with_payload": True}),
                 "count": lambda: cols.count("c", {}),
                 "get_collection": lambda: cols.info("c"),
                 "upsert": upsert_one}
        out: dict[str, float] = {}
        for name, call in calls.items():
            call()
            times = []
            for _ in range(args.calls if name != "upsert" else min(args.calls, 40)):
                t = time.perf_counter()
                call()
                times.append(time.perf_counter() - t)
            out[f"{name}_p50_ms"] = round(1000 * statistics.median(times), 3)
        print(json.dumps({"n": args.n, "dim": args.dim, "state": cols.served("c").state, **out}))
        if args.profile:
            prof = cProfile.Profile()
            prof.runcall(calls[args.profile])
            pstats.Stats(prof).sort_stats("cumulative").print_stats(12)
        st.shutdown()


if __name__ == "__main__":
    main()
