"""Wall time of ``slimvec rebuild`` against re-ingesting the same texts with the new recipe.

Both are whole commands run as subprocesses on the same real sentences (``--docs``, default the
bundled ``slimvec/data/sentences.jsonl``, 5,000 STS-B / SICK / MSRP sentences):

1. ``slimvec ingest DOCS --index A --recipe OLD``  (the index to change; not timed against)
2. ``slimvec rebuild --index A --recipe NEW``      (refit on the kept full vectors, no encoder)
3. ``slimvec ingest DOCS --index B --recipe NEW``  (what a user does without rebuild)

``slimvec bench`` measures recall and latency of reducer x store grids on vectors; it has no
notion of timing whole commands, hence this script. Issue 25 asks for re-ingest >= 10x slower.

Usage::

    python scripts/bench_rebuild.py --out /tmp/rebuild.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "slimvec" / "data"


def _run(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=Path, default=DATA / "sentences.jsonl")
    ap.add_argument("--old", default="pca:96|qdrant-edge|rescore=auto,keep_full=float16")
    ap.add_argument("--new", default="pca:128|faiss:HNSW32|rescore=auto,keep_full=float16")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    slimvec = [sys.executable, "-m", "slimvec"]
    work = Path(tempfile.mkdtemp(prefix="bench-rebuild-"))
    try:
        n = sum(1 for line in args.docs.open(encoding="utf-8") if line.strip())
        first = _run([*slimvec, "ingest", str(args.docs), "--index", str(work / "a"),
                      "--recipe", args.old, "--json"])
        rebuild = _run([*slimvec, "rebuild", "--index", str(work / "a"), "--recipe", args.new,
                        "--json"])
        reingest = _run([*slimvec, "ingest", str(args.docs), "--index", str(work / "b"),
                         "--recipe", args.new, "--json"])
        result = {"documents": n, "old_recipe": args.old, "new_recipe": args.new,
                  "ingest_old_seconds": round(first, 2), "rebuild_seconds": round(rebuild, 2),
                  "reingest_seconds": round(reingest, 2),
                  "reingest_over_rebuild": round(reingest / rebuild, 2),
                  "cpus": os.cpu_count(), "load_average": os.getloadavg(),
                  "command": "python scripts/bench_rebuild.py " + " ".join(sys.argv[1:])}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
