"""kill -9 trials: SIGKILL a real ``slimvec ingest`` at seeded random moments, resume, check.

Usage: ``python scripts/kill_trials.py --trials 10 --stores qdrant-edge,faiss,hnsw``
Prints one JSON line per trial and a per-store summary.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.reliability.killtrial import make_corpus, run_trial  # noqa: E402

log = logging.getLogger("kill_trials")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--stores", default="qdrant-edge,faiss,hnsw")
    ap.add_argument("--docs", type=int, default=1500)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        rows = make_corpus(corpus, args.docs)
        for store in args.stores.split(","):
            results = [run_trial(corpus, rows, Path(tmp) / f"{store}-{t}", store, seed=t)
                       for t in range(args.trials)]
            for r in results:
                log.info(json.dumps(r))
            log.info(json.dumps({"store": store, "trials": len(results),
                                 "killed_mid_run": sum(r["killed"] for r in results),
                                 "lost": sum(r["lost"] for r in results),
                                 "duplicates": sum(r["duplicates"] for r in results),
                                 "unsearchable": sum(r["unsearchable"] for r in results)}))


if __name__ == "__main__":
    main()
