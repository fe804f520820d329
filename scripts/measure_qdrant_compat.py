"""RSS and p50 query latency of one 5,000-vector collection behind ``slimvec serve``'s
Qdrant-compatible API, through qdrant-client's REST transport (issue 26), for BENCHMARKS.md.

The same collection in qdrant-client's local mode (``QdrantClient(":memory:")``, pure Python, in
process) is measured as a congruence reference only: it is not a Qdrant server and its timing is
not a fair comparison. Corpus: the first 5,000 unique sentences of the bundled STS-B train file,
MiniLM vectors from the suite's encoding cache; queries: the next 200 sentences.

Usage: PYTHONPATH=. OMP_NUM_THREADS=1 python scripts/measure_qdrant_compat.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import bundled_sentences  # noqa: E402
from tests.service.server import Server  # noqa: E402

N, NQ = 5000, 200


def _vectors() -> np.ndarray:
    from slimvec.benchmarks.encoding_cache import EncodingCache
    from slimvec.indexer.encoder import Encoder

    enc = Encoder()
    cache = Path(os.environ.get("SLIMVEC_TEST_CACHE", Path.home() / ".cache" / "slimvec-tests"))
    return np.asarray(EncodingCache(cache / "encodings", enc.fingerprint).encode(
        enc, bundled_sentences(N + NQ)), dtype=np.float32)


def _load_and_time(client, X: np.ndarray) -> dict:
    from qdrant_client import models as m

    client.create_collection("bench", vectors_config=m.VectorParams(size=X.shape[1],
                                                                    distance=m.Distance.COSINE))
    t0 = time.perf_counter()
    for lo in range(0, N, 500):
        client.upsert("bench", wait=True, points=[
            m.PointStruct(id=i, vector=X[i].tolist(), payload={"row": i}) for i in range(lo, lo + 500)])
    load_s = time.perf_counter() - t0
    times = []
    for q in X[N:N + NQ]:
        t = time.perf_counter()
        client.query_points("bench", query=q.tolist(), limit=10, with_payload=True)
        times.append(time.perf_counter() - t)
    return {"upsert_s": round(load_s, 2), "p50_ms": round(1000 * statistics.median(times), 2),
            "p95_ms": round(1000 * float(np.percentile(times, 95)), 2)}


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from qdrant_client import QdrantClient

    X = _vectors()
    out: dict = {"n": N, "queries": NQ, "dim": int(X.shape[1])}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with Server(root) as srv:
            rss_idle = _rss_kib(srv.proc.pid)
            res = _load_and_time(QdrantClient(url=srv.url, timeout=300), X)
            info = QdrantClient(url=srv.url, timeout=300).get_collection("bench")
            out["slimvec_serve"] = {**res, "rss_idle_mib": round(rss_idle / 1024, 1),
                                    "rss_loaded_mib": round(_rss_kib(srv.proc.pid) / 1024, 1),
                                    "points": info.points_count,
                                    "recipe": "server default (pca:96|qdrant-edge|rescore=auto,"
                                              "keep_full=float16)"}
    tracemalloc.start()
    local = QdrantClient(":memory:")
    res = _load_and_time(local, X)
    out["qdrant_client_memory_reference"] = {
        **res, "python_heap_peak_mib": round(tracemalloc.get_traced_memory()[1] / 2 ** 20, 1),
        "note": "pure-Python local mode in process: a congruence reference, not a fair timing"}
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
