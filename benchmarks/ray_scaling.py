"""``slimvec ingest --engine ray`` on one worker node and on two, with the model call removed.

    python -m benchmarks.ray_scaling --docs 40000 --out docs/benchmarks/ray-scaling.json

A real cluster in network namespaces (``tests/engines/netns_cluster.py``: a head with no CPU where
the driver runs, worker nodes of one CPU each, pinned to their own core with ``taskset``, token
authentication). Every Ray worker process encodes with
:class:`~benchmarks.kinds.ingest.MatrixEncoder` (installed by Ray's ``worker_process_setup_hook``:
the real tokenizer, vectors looked up in a seeded matrix), so a run times what is not the model:
reading, the actors, the object store, the segments written and their graphs built on the
workers, the driver's adoptions and commits, the calibration. The same ingest runs with worker
node ``w1`` alone (``--workers 1``), then with ``w1`` and ``w2`` (``--workers 2``), each into a
new index; the figures are each run's documents per second of wall time and the per-node summary.
Needs root (namespaces); the runs take a few minutes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
CORPUS = Path.home() / ".cache" / "slimvec-corpus" / "corpus.jsonl"
ENV_CORPUS = "SLIMVEC_BENCH_CORPUS"


def install() -> None:
    """Ray's worker setup hook: ``BuildSpec.load_encoder`` gives a :class:`MatrixEncoder` of the
    texts in ``$SLIMVEC_BENCH_CORPUS`` (built once per process, the same seeded matrix everywhere)."""
    from benchmarks.kinds.ingest import MatrixEncoder
    from slimvec.buildspec import BuildSpec

    with open(os.environ[ENV_CORPUS], encoding="utf-8") as fh:
        encoder = MatrixEncoder([json.loads(line)["text"] for line in fh])
    BuildSpec.load_encoder = lambda self, device="auto", batch_size=64: encoder  # type: ignore[method-assign,return-value,assignment]


def drive(address: str, corpus: str, index: str, workers: int, segment_docs: int) -> dict[str, Any]:
    """The driver, in the head's namespace: join the cluster with the hook, run the ingest."""
    import ray

    from slimvec.engines.ray_ingest import RayOptions, ray_ingest
    from slimvec.indexer.pipeline import IngestOptions

    os.environ[ENV_CORPUS] = corpus
    ray.init(address=address, include_dashboard=False, log_to_driver=False, runtime_env={
        "worker_process_setup_hook": "benchmarks.ray_scaling.install",
        "env_vars": {ENV_CORPUS: corpus, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
    install()  # the driver's own fail-fast encoder checks see the same encoder
    t0 = time.perf_counter()
    summary = ray_ingest(corpus, index, IngestOptions(progress=False, batch_size=256),
                         RayOptions(address=address, workers=workers, segment_docs=segment_docs))
    seconds = time.perf_counter() - t0
    return {"workers": workers, "seconds": round(seconds, 1), "ingested": summary.ingested,
            "count": summary.count, "docs_per_s": round(summary.ingested / seconds, 1),
            "nodes": summary.nodes}


def run(docs: int, segment_docs: int) -> dict[str, Any]:
    """Both runs on a fresh cluster: ``w1`` alone, then ``w1`` and ``w2``."""
    import subprocess

    from tests.engines.netns_cluster import NetnsCluster, why_not

    reason = why_not()
    if reason:
        raise SystemExit(f"no cluster: {reason}")
    cluster = NetnsCluster()
    rows = []
    try:
        cluster.make_network()
        corpus = cluster.base / "corpus.jsonl"
        with open(CORPUS, encoding="utf-8") as src, open(corpus, "w", encoding="utf-8") as dst:
            for i, line in zip(range(docs), src):
                dst.write(json.dumps({"id": f"d{i}", "text": json.loads(line)["text"]}) + "\n")
        cluster.start_node("h", cpus=0)
        cluster.wait_started("h")
        for workers in (1, 2):
            host = f"w{workers}"
            cluster.start_node(host, cpus=1)
            cluster.wait_started(host)
            out = cluster.base / f"run-{workers}.json"
            cmd = ["ip", "netns", "exec", cluster.ns("h"), sys.executable, "-m",
                   "benchmarks.ray_scaling", "--drive", cluster.address, str(corpus),
                   str(cluster.base / f"idx-{workers}"), str(workers), str(segment_docs)]
            done = subprocess.run(cmd, env=cluster.env, cwd=cluster.base, stdout=open(out, "wb"),
                                  stderr=subprocess.PIPE, timeout=3600)
            if done.returncode != 0:
                raise SystemExit(f"run with {workers} worker node(s) failed:\n"
                                 f"{done.stderr.decode(errors='replace')[-3000:]}")
            rows.append(json.loads(out.read_text()))
            log.info("%d worker node(s): %s", workers, rows[-1])
    finally:
        cluster.close()
    return {"documents": docs, "segment_docs": segment_docs, "rows": rows,
            "two_over_one": round(rows[1]["docs_per_s"] / rows[0]["docs_per_s"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=40_000)
    parser.add_argument("--segment-docs", type=int, default=8_192)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--drive", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        address, corpus, index, workers, seg = args.drive
        print(json.dumps(drive(address, corpus, index, int(workers), int(seg))))
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result = run(args.docs, args.segment_docs)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
